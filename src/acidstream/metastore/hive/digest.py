"""SASL DIGEST-MD5 (RFC 2831) with a Hive Metastore delegation token, as Hadoop's clients authenticate with one.

A process without Kerberos credentials of its own (a Spark executor's worker) reaches a kerberized metastore with
a token that a process with a ticket got for it (``get_delegation_token``). The token string is Hadoop's
``Token.encodeToUrlString``: URL-safe base64 of the token's identifier, password, kind and service, each
length-prefixed as Hadoop's ``Writable``\\ s write them. Hadoop's SASL client logs in with the identifier as the
user name and the password, each base64-encoded, in the realm ``default``, for the digest-uri ``null/default``
(Hadoop names no protocol, and the server ``default``).

This module answers the server's one challenge and checks its ``rspauth``: quality of protection ``auth`` only
(the integrity and confidentiality layers of DIGEST-MD5, HMAC-MD5 and RC4/3DES, are not implemented: a metastore
that offers only those is refused, naming the setting). Written here rather than taken from pure-sasl, whose
DIGEST-MD5 is unmaintained since 2019 and also ``auth`` only, while the SASL framing around it is
:mod:`acidstream.metastore.hive.sasl`'s own.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass

MECHANISM = b"DIGEST-MD5"
REALM = "default"
DIGEST_URI = "null/default"
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
    then :meth:`verify` its ``rspauth``."""

    def __init__(self, token: DelegationToken) -> None:
        identifier, password, _, _ = token.parts()
        self._user = base64.b64encode(identifier)
        self._password = base64.b64encode(password)
        self._cnonce = base64.b64encode(os.urandom(24))
        self._expected: bytes | None = None

    def respond(self, challenge: bytes) -> bytes:
        """The digest-response to ``challenge`` (QOP ``auth``); ValueError saying what is missing or offered."""
        fields = parse_challenge(challenge)
        qops = fields.get(b"qop", b"auth").split(b",")
        if b"auth" not in [q.strip() for q in qops]:
            raise ValueError(
                f"the metastore offers QOP {fields.get(b'qop', b'').decode()} for DIGEST-MD5; this client speaks "
                "auth only: the metastore's hadoop.rpc.protection must include authentication"
            )
        if b"nonce" not in fields:
            raise ValueError("the DIGEST-MD5 challenge has no nonce")
        nonce, realm = fields[b"nonce"], fields.get(b"realm", REALM.encode())
        nc = b"00000001"
        secret = hashlib.md5(b":".join((self._user, realm, self._password))).digest()
        a1 = secret + b":" + nonce + b":" + self._cnonce
        ha1 = hashlib.md5(a1).hexdigest().encode()

        def digest(a2: bytes) -> bytes:
            ha2 = hashlib.md5(a2).hexdigest().encode()
            return hashlib.md5(b":".join((ha1, nonce, nc, self._cnonce, b"auth", ha2))).hexdigest().encode()

        uri = DIGEST_URI.encode()
        self._expected = digest(b":" + uri)
        pairs = [
            (b"username", _quoted(self._user)),
            (b"realm", _quoted(realm)),
            (b"nonce", _quoted(nonce)),
            (b"cnonce", _quoted(self._cnonce)),
            (b"nc", nc),
            (b"qop", b"auth"),
            (b"digest-uri", _quoted(uri)),
            (b"response", digest(b"AUTHENTICATE:" + uri)),
            (b"charset", b"utf-8"),
        ]
        return b",".join(key + b"=" + value for key, value in pairs)

    def verify(self, final: bytes) -> None:
        """Check the server's ``rspauth`` (it knew the token's password); ValueError if it is wrong."""
        rspauth = parse_challenge(final).get(b"rspauth")
        if self._expected is None or rspauth != self._expected:
            raise ValueError("the metastore's DIGEST-MD5 rspauth does not match: it does not hold this token")


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
