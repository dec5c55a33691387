"""SASL DIGEST-MD5 (RFC 2831) with a Hive Metastore delegation token, as Hadoop's clients authenticate with one.

A process without Kerberos credentials of its own (a Spark executor's worker) reaches a kerberized metastore with
a token that a process with a ticket got for it (``get_delegation_token``). The token string is Hadoop's
``Token.encodeToUrlString``: URL-safe base64 of the token's identifier, password, kind and service, each
length-prefixed as Hadoop's ``Writable``\\ s write them. Hadoop's SASL client logs in with the identifier as the
user name and the password, each base64-encoded, in the realm ``default``, for the digest-uri ``null/default``
(Hadoop names no protocol, and the server ``default``).

This module answers the server's one challenge and checks its ``rspauth``, with the quality of protection the
metastore's ``hadoop.rpc.protection`` offers: ``auth``; ``auth-int``, every message signed (HMAC-MD5, with
sequence numbers); or ``auth-conf``, every message also sealed with the strongest cipher of those Java's
DIGEST-MD5 server offers that its client would pick too (``3des``, then ``rc4``, ``des``, ``rc4-56``,
``rc4-40``), on the ``cryptography`` package, loaded only then. Written here rather than taken from pure-sasl,
whose DIGEST-MD5 is unmaintained since 2019 and ``auth`` only, while the SASL framing around it is
:mod:`acidstream.metastore.hive.sasl`'s own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import struct
from dataclasses import dataclass
from typing import Any

MECHANISM = b"DIGEST-MD5"
REALM = "default"
DIGEST_URI = "null/default"
#: The QOPs this client takes, in its order of preference when none is asked for.
QOPS = ("auth", "auth-conf", "auth-int")
#: ``auth-conf``'s ciphers, strongest first, as Java's client ranks them: the first the server offers is chosen.
CIPHERS = ("3des", "rc4", "des", "rc4-56", "rc4-40")
#: The most a wrapped message this client takes may hold (its ``maxbuf``: RFC 2831's largest).
MAX_BUFFER = (1 << 24) - 1
_SECURITY_LAYER = b":" + b"0" * 32  # A2's suffix where a security layer is chosen
_PAIR = re.compile(rb'\s*([A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)')


class TokenError(ValueError):
    """A delegation token string that does not decode as Hadoop writes one."""


@dataclass(frozen=True, repr=False)
class DelegationToken:
    """A Hive Metastore delegation token as its string form (``get_delegation_token``'s answer). Its repr and
    str show the kind and a fingerprint of the identifier, never the password."""

    text: str

    def __post_init__(self) -> None:
        self.parts()  # a bad token is refused where it is given

    def parts(self) -> tuple[bytes, bytes, str, str]:
        """(identifier, password, kind, service) decoded from the URL-safe base64 string."""
        try:
            data = base64.urlsafe_b64decode(self.text + "=" * (-len(self.text) % 4))
            reader = _WritableReader(data)
            identifier, password = reader.field(), reader.field()
            kind, service = reader.field().decode(), reader.field().decode()
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise TokenError(f"not a Hadoop delegation token string: {exc}") from None
        return identifier, password, kind, service

    def fingerprint(self) -> str:
        return hashlib.sha256(self.parts()[0]).hexdigest()[:12]

    def __repr__(self) -> str:
        return f"DelegationToken({self.parts()[2] or 'token'} {self.fingerprint()})"

    __str__ = __repr__


class _WritableReader:
    """Hadoop's ``WritableUtils`` variable-length integers and the byte fields they prefix."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        value = self.data[self.at]
        self.at += 1
        return value

    def vint(self) -> int:
        first = self.byte()
        first -= 256 if first > 127 else 0  # a signed byte
        if first >= -112:
            return first
        size = -119 - first if first < -120 else -111 - first
        value = 0
        for _ in range(size - 1):
            value = (value << 8) | self.byte()
        return ~value if first < -120 else value

    def field(self) -> bytes:
        length = self.vint()
        if length < 0 or self.at + length > len(self.data):
            raise ValueError("a field runs past the end")
        value = self.data[self.at : self.at + length]
        self.at += length
        return value


class DigestMd5:
    """The client's side of one DIGEST-MD5 exchange for ``token``: :meth:`respond` to the server's challenge,
    then :meth:`verify` its ``rspauth``; after that, :attr:`layer` wraps and unwraps messages where a QOP other
    than ``auth`` was agreed. ``qop``: the one to ask for (the metastore must offer it), else the first of
    :data:`QOPS` offered."""

    def __init__(self, token: DelegationToken, qop: str | None = None) -> None:
        identifier, password, _, _ = token.parts()
        self._user = base64.b64encode(identifier)
        self._password = base64.b64encode(password)
        self._cnonce = base64.b64encode(os.urandom(24))
        self._qop = qop
        self.qop: str | None = None  # the one agreed, once answered
        self._expected: bytes | None = None
        self._session: tuple[bytes, str | None] | None = None  # H(A1) and the cipher, for the layer
        self.layer: SecurityLayer | None = None

    def _choose(self, fields: dict[bytes, bytes]) -> tuple[str, str | None]:
        """The QOP and (for ``auth-conf``) the cipher to answer ``fields`` with; ValueError naming the offer."""
        offered = [q.strip().decode() for q in fields.get(b"qop", b"auth").split(b",")]
        wanted = [self._qop] if self._qop else [q for q in QOPS if q in offered]
        if not wanted or wanted[0] not in offered:
            raise ValueError(
                f"the metastore offers QOP {', '.join(offered)} for DIGEST-MD5, this client asks for "
                f"{self._qop or ', '.join(QOPS)}; set kerberos_qop to the metastore's hadoop.rpc.protection"
            )
        if wanted[0] != "auth-conf":
            return wanted[0], None
        ciphers = [c.strip().decode() for c in fields.get(b"cipher", b"").split(b",")]
        chosen = next((c for c in CIPHERS if c in ciphers), None)
        if chosen is None:
            raise ValueError(
                f"the metastore offers no DIGEST-MD5 cipher this client has ({', '.join(ciphers)})"
            )
        return "auth-conf", chosen

    def respond(self, challenge: bytes) -> bytes:
        """The digest-response to ``challenge``; ValueError saying what is missing or offered."""
        fields = parse_challenge(challenge)
        qop, cipher = self._choose(fields)
        self.qop = qop
        if b"nonce" not in fields:
            raise ValueError("the DIGEST-MD5 challenge has no nonce")
        nonce, realm = fields[b"nonce"], fields.get(b"realm", REALM.encode())
        nc = b"00000001"
        secret = hashlib.md5(b":".join((self._user, realm, self._password))).digest()
        session = hashlib.md5(secret + b":" + nonce + b":" + self._cnonce).digest()
        ha1 = session.hex().encode()
        layer = b"" if qop == "auth" else _SECURITY_LAYER

        def digest(a2: bytes) -> bytes:
            ha2 = hashlib.md5(a2 + layer).hexdigest().encode()
            return (
                hashlib.md5(b":".join((ha1, nonce, nc, self._cnonce, qop.encode(), ha2))).hexdigest().encode()
            )

        uri = DIGEST_URI.encode()
        self._expected = digest(b":" + uri)
        self._session = (session, cipher) if qop != "auth" else None
        pairs = [
            (b"username", _quoted(self._user)),
            (b"realm", _quoted(realm)),
            (b"nonce", _quoted(nonce)),
            (b"cnonce", _quoted(self._cnonce)),
            (b"nc", nc),
            (b"qop", qop.encode()),
            (b"digest-uri", _quoted(uri)),
            (b"response", digest(b"AUTHENTICATE:" + uri)),
            (b"charset", b"utf-8"),
        ]
        if qop != "auth":
            pairs.append((b"maxbuf", str(MAX_BUFFER).encode()))
        if cipher is not None:
            pairs.append((b"cipher", cipher.encode()))
        return b",".join(key + b"=" + value for key, value in pairs)

    def verify(self, final: bytes) -> None:
        """Check the server's ``rspauth`` (it knew the token's password); ValueError if it is wrong. Then the
        security layer agreed, if any, is :attr:`layer`."""
        rspauth = parse_challenge(final).get(b"rspauth")
        if self._expected is None or rspauth != self._expected:
            raise ValueError("the metastore's DIGEST-MD5 rspauth does not match: it does not hold this token")
        if self._session is not None:
            self.layer = SecurityLayer(*self._session)


_MESSAGE_TYPE = b"\x00\x01"
_MAGIC = b"Digest session key to %s-to-%s signing key magic constant"
_SEAL_MAGIC = b"Digest H(A1) to %s-to-%s sealing key magic constant"


class SecurityLayer:
    """RFC 2831's integrity layer (a message, its HMAC-MD5 over a sequence number and it, cut to 10 bytes, the
    message type and the sequence number) and, with a ``cipher``, its confidentiality layer (the message, block
    padding and the MAC sealed, chained across messages as Java's server chains them). Either side's message out
    of sequence, or with a MAC that does not match, is a ValueError: the connection cannot go on."""

    def __init__(self, session: bytes, cipher: str | None) -> None:
        self._sign = hashlib.md5(session + _MAGIC % (b"client", b"server")).digest()
        self._check = hashlib.md5(session + _MAGIC % (b"server", b"client")).digest()
        self._sent = self._received = 0
        self._block = 1
        self._seal: Any = None
        self._open: Any = None
        if cipher is not None:
            size = {"rc4-40": 5, "rc4-56": 7}.get(cipher, 16)
            seal = hashlib.md5(session[:size] + _SEAL_MAGIC % (b"client", b"server")).digest()
            open_ = hashlib.md5(session[:size] + _SEAL_MAGIC % (b"server", b"client")).digest()
            self._seal, self._open = _cipher(cipher, seal).encryptor(), _cipher(cipher, open_).decryptor()
            self._block = 1 if cipher.startswith("rc4") else 8

    def wrap(self, data: bytes) -> bytes:
        if not data:
            return data
        sequence = struct.pack("!I", self._sent)
        self._sent += 1
        mac = hmac.digest(self._sign, sequence + data, "md5")[:10]
        if self._seal is None:
            return data + mac + _MESSAGE_TYPE + sequence
        pad = self._block - (len(data) + 10) % self._block if self._block > 1 else 0
        return bytes(self._seal.update(data + bytes([pad]) * pad + mac)) + _MESSAGE_TYPE + sequence

    def unwrap(self, data: bytes) -> bytes:
        if not data:
            return data
        if len(data) < 16:
            raise ValueError("a DIGEST-MD5 message shorter than its trailer")
        kind, sequence = data[-6:-4], data[-4:]
        if self._open is None:
            message, mac = data[:-16], data[-16:-6]
        else:
            clear = bytes(self._open.update(data[:-6]))
            message, mac = clear[:-10], clear[-10:]
            if self._block > 1:
                pad = message[-1] if message else 0
                if not 1 <= pad <= self._block:
                    raise ValueError(
                        "a DIGEST-MD5 message with bad padding: not sealed with this session's key"
                    )
                message = message[:-pad]
        if not hmac.compare_digest(mac, hmac.digest(self._check, sequence + message, "md5")[:10]):
            raise ValueError("a DIGEST-MD5 message whose MAC does not match: altered, or not of this session")
        if kind != _MESSAGE_TYPE or struct.unpack("!I", sequence)[0] != self._received:
            raise ValueError(f"a DIGEST-MD5 message out of sequence (expected number {self._received})")
        self._received += 1
        return message


def _cipher(name: str, key: bytes) -> Any:
    """``auth-conf``'s cipher ``name`` keyed from a 16-byte sealing key: RC4 with all of it; DES with the first 7
    bytes and 3DES (two keys, EDE) with the first 14, spread to 8-byte keys with parity bits, in CBC with the last
    8 bytes as the IV, as RFC 2831 and Java's implementation make them."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import ARC4, TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    if name.startswith("rc4"):
        return Cipher(ARC4(key), mode=None)
    first = _des_key(key[:7])
    second = _des_key(key[7:14]) if name == "3des" else first
    return Cipher(TripleDES(first + second + first), modes.CBC(key[8:16]))


def _des_key(seven: bytes) -> bytes:
    """56 key bits as a DES key: 7 bits a byte, each byte's lowest bit set for odd parity."""
    bits = int.from_bytes(seven, "big")
    key = bytearray()
    for shift in range(49, -1, -7):
        byte = ((bits >> shift) & 0x7F) << 1
        key.append(byte | (bin(byte).count("1") + 1) % 2)
    return bytes(key)


def parse_challenge(text: bytes) -> dict[bytes, bytes]:
    """A DIGEST-MD5 challenge's ``key=value`` pairs, quoted values unquoted."""
    fields: dict[bytes, bytes] = {}
    for key, value in _PAIR.findall(text):
        if value.startswith(b'"'):
            value = re.sub(rb"\\(.)", rb"\1", value[1:-1])
        fields.setdefault(key.lower(), value)
    return fields


def _quoted(value: bytes) -> bytes:
    return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
