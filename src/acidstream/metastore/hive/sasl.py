"""Kerberos to a Hive Metastore: thrift's SASL framing with the GSSAPI mechanism (RFC 4752) on python-gssapi.

A kerberized metastore (``metastore.sasl.enabled``) speaks thrift's SASL transport: the client sends ``START``
with the mechanism's name, then GSSAPI tokens in ``OK`` frames until the security context is set up, then the
security layer is agreed (the server offers the qualities of protection it is configured with, Hadoop's
``hadoop.rpc.protection``; the client picks one) and the server says ``COMPLETE``. After that every thrift
message travels in a length-prefixed frame, wrapped by GSSAPI (signed, or sealed) unless the QOP is ``auth``.

This small layer replaces thrift's own ``TSaslClientTransport``, whose pure-sasl GSSAPI mechanism needs the
unmaintained ``kerberos`` binding and can use only the default ticket cache: python-gssapi reads a keytab
itself (``client_keytab``, renewing tickets from it as they expire: :mod:`acidstream.kerberos`) and its errors
name what is missing. The same framing carries DIGEST-MD5 with a delegation token (:mod:`.digest`) and SASL
PLAIN with a user name and password (Hive 4's ``metastore.client.auth.mode=PLAIN``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from thrift.transport.TTransport import TTransportBase, TTransportException

from acidstream.errors import AuthenticationError
from acidstream.kerberos import KerberosCredentials, LoginFailed, describe_client, gss_text
from acidstream.metastore.hive.digest import MECHANISM, DelegationToken, DigestMd5, SecurityLayer

#: The security layers of RFC 4752 by the name SASL gives their QOP, as the bit the server offers.
QOP_BITS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
#: Hadoop's ``hadoop.rpc.protection`` values, which name the same three.
HADOOP_PROTECTION = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}
DEFAULT_SERVICE_PRINCIPAL = "hive/_HOST"
_START, _OK, _BAD, _ERROR, _COMPLETE = 1, 2, 3, 4, 5
#: The largest wrapped message this client accepts (the size its security layer answer announces).
_MAX_BUFFER = 16 * 1024 * 1024
_FRAME_LIMIT = 1 << 31


@dataclass(frozen=True)
class KerberosSettings:
    """How to authenticate to a kerberized metastore.

    ``service_principal``: the metastore's principal as Hive's ``metastore.kerberos.principal`` writes it;
    ``_HOST`` is replaced by the URI's host, lower-cased, without a DNS lookup; no realm means the default
    realm. ``principal`` and ``keytab``: the caller's own principal and a keytab for it; without a keytab the
    ticket cache (``KRB5CCNAME``, filled by ``kinit``) is used, for ``principal`` or its default one. ``qop``:
    ``auth``, ``auth-int`` or ``auth-conf`` (or Hadoop's names), as the metastore is configured."""

    service_principal: str = DEFAULT_SERVICE_PRINCIPAL
    principal: str | None = None
    keytab: str | None = None
    qop: str = "auth"

    def __post_init__(self) -> None:
        qop = HADOOP_PROTECTION.get(self.qop, self.qop)
        if qop not in QOP_BITS:
            known = ", ".join([*QOP_BITS, *HADOOP_PROTECTION])
            raise ValueError(f"unknown Kerberos QOP {self.qop!r} (known: {known})")
        object.__setattr__(self, "qop", qop)
        if self.keytab is not None and not self.principal:
            raise ValueError("a Kerberos keytab needs the principal to log in as (kerberos_principal)")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> KerberosSettings | None:
        """The settings in ``Metastore.connect``'s options (``kerberos=True`` or any ``kerberos_*`` option),
        removed from ``options``; None when there are none."""
        enabled = options.pop("kerberos", None)
        if isinstance(enabled, KerberosSettings):
            return enabled
        given = {
            key: options.pop(f"kerberos_{key}")
            for key in ("service_principal", "principal", "keytab", "qop")
            if options.get(f"kerberos_{key}") is not None
        }
        for key in ("service_principal", "principal", "keytab", "qop"):
            options.pop(f"kerberos_{key}", None)
        if enabled is False or (not enabled and not given):
            return None
        return cls(**given)

    def service_for(self, host: str) -> str:
        """The service principal for a metastore at ``host``: ``_HOST`` as Hive's clients replace it."""
        return self.service_principal.replace("_HOST", host.lower())


#: Hive's ``metastore.client.auth.mode`` values for a thrift metastore (Kerberos is Hive's ``metastore.sasl.enabled``).
AUTH_MODES = ("NOSASL", "KERBEROS", "PLAIN")
_PLAIN_OPTIONS = ("plain_user", "plain_password", "allow_plain_without_tls")


@dataclass(frozen=True)
class PlainSettings:
    """SASL PLAIN, Hive 4's ``metastore.client.auth.mode=PLAIN``: a user name and password that a metastore with
    ``metastore.authentication`` CONFIG, LDAP or CUSTOM checks. The password travels as written, so it is sent
    only over TLS unless ``allow_without_tls`` (a network the caller trusts). Its repr shows the user only."""

    user: str
    password: str = field(repr=False)
    allow_without_tls: bool = False

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> PlainSettings | None:
        """The PLAIN settings among ``Metastore.connect``'s options (``auth_mode="PLAIN"``, or ``plain_user``),
        removed from ``options``; None when the options ask for none. ``auth_mode="KERBEROS"`` leaves
        ``kerberos=True`` behind, ``"NOSASL"`` refuses Kerberos settings; ValueError for settings that cannot
        work together (naming no secret)."""
        mode = str(options.pop("auth_mode", None) or "").upper() or None
        user, password = options.pop("plain_user", None), options.pop("plain_password", None)
        allow = bool(options.pop("allow_plain_without_tls", False))
        if mode is not None and mode not in AUTH_MODES:
            raise ValueError(f"unknown auth_mode {mode!r} (known: {', '.join(AUTH_MODES)})")
        plain = mode == "PLAIN" or (mode is None and (user is not None or password is not None))
        if not plain:
            if user is not None or password is not None:
                raise ValueError(f"plain_user and plain_password go with auth_mode PLAIN, not {mode}")
            kerberos = [k for k in options if k.startswith("kerberos") and options[k] not in (None, False)]
            if mode == "NOSASL" and kerberos:
                raise ValueError(f"auth_mode NOSASL with Kerberos settings ({', '.join(sorted(kerberos))})")
            if mode == "KERBEROS" and options.get("kerberos") is None:
                options["kerberos"] = True
            return None
        if not user or not password:
            raise ValueError("auth_mode PLAIN needs plain_user and plain_password")
        if any(options.get(k) not in (None, False) for k in options if k.startswith("kerberos")):
            raise ValueError("SASL PLAIN and Kerberos settings together: choose one (auth_mode)")
        return cls(str(user), str(password), allow)


class NoCredentials(AuthenticationError):
    """The caller has no Kerberos credentials to offer (no ticket, an expired one, no keytab): refused before
    any metastore is asked, so no other metastore of a list is tried."""


class SaslTransport(TTransportBase):
    """A thrift transport over ``inner`` (an open socket) that authenticates on :meth:`open` (a mechanism's
    subclass), then frames every message, wrapped by :meth:`_wrap` (signed or sealed) where the QOP asks."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._write_buffer = bytearray()
        self._read_buffer = memoryview(b"")

    def isOpen(self) -> bool:
        return bool(self._inner.isOpen())

    def _wrap(self, data: bytes) -> bytes:
        return data

    def _unwrap(self, data: bytes) -> bytes:
        return data

    def _send(self, status: int, payload: bytes) -> None:
        self._inner.write(struct.pack("!BI", status, len(payload)) + payload)
        self._inner.flush()

    def _receive(self) -> tuple[int, bytes]:
        status, length = struct.unpack("!BI", self._inner.readAll(5))
        if length >= _FRAME_LIMIT:
            raise TTransportException(TTransportException.INVALID_FRAME_SIZE, "SASL frame too large")
        return status, self._inner.readAll(length)

    def close(self) -> None:
        self._inner.close()

    def write(self, buf: bytes) -> None:
        self._write_buffer += buf

    def flush(self) -> None:
        data = self._wrap(bytes(self._write_buffer))
        self._write_buffer = bytearray()
        self._inner.write(struct.pack("!I", len(data)) + data)
        self._inner.flush()

    def read(self, sz: int) -> bytes:
        if not self._read_buffer:
            (length,) = struct.unpack("!I", self._inner.readAll(4))
            if length >= _FRAME_LIMIT:
                raise TTransportException(TTransportException.INVALID_FRAME_SIZE, "thrift frame too large")
            self._read_buffer = memoryview(self._unwrap(self._inner.readAll(length)))
        data, self._read_buffer = self._read_buffer[:sz], self._read_buffer[sz:]
        return bytes(data)


class GssapiSaslTransport(SaslTransport):
    """SASL GSSAPI (Kerberos) on :meth:`open`, then every message wrapped per the QOP agreed."""

    def __init__(self, inner: Any, settings: KerberosSettings, credentials: Any, host: str, url: str) -> None:
        super().__init__(inner)
        self._settings = settings
        self._credentials = credentials
        self._service = settings.service_for(host)
        self._url = url
        self._context: Any = None
        self._qop = "auth"

    def _wrap(self, data: bytes) -> bytes:
        return (
            data if self._qop == "auth" else bytes(self._context.wrap(data, self._qop == "auth-conf").message)
        )

    def _unwrap(self, data: bytes) -> bytes:
        return data if self._qop == "auth" else bytes(self._context.unwrap(data).message)

    def open(self) -> None:
        import gssapi

        try:
            name = gssapi.Name(self._service, gssapi.NameType.kerberos_principal)
            flags = gssapi.RequirementFlag
            self._context = gssapi.SecurityContext(
                name=name,
                creds=self._credentials,
                usage="initiate",
                flags=flags.mutual_authentication | flags.integrity | flags.confidentiality,
            )
            token = self._context.step()
        except gssapi.exceptions.GSSError as exc:
            raise self._refused(gss_text(exc)) from None
        self._send(_START, b"GSSAPI")
        self._send(_OK, token or b"")
        while True:
            status, payload = self._receive()
            if status not in (_OK, _COMPLETE):
                text = payload.decode("utf-8", "replace")
                raise self._refused(f"the metastore ended the SASL negotiation: status {status} ({text})")
            try:
                answer = self._negotiate(payload) if payload or status == _OK else None
            except gssapi.exceptions.GSSError as exc:
                raise self._refused(gss_text(exc)) from None
            if status == _COMPLETE:
                if not self._context.complete:
                    raise self._refused("the metastore completed SASL before Kerberos did")
                return
            self._send(_OK, answer or b"")

    def _negotiate(self, token: bytes) -> bytes:
        """The answer to one server token: the context's next token, then the security layer's choice."""
        if not self._context.complete:
            return bytes(self._context.step(token) or b"")
        offer = self._context.unwrap(token).message
        if len(offer) != 4:
            raise self._refused("the metastore's security layer offer is not 4 bytes")
        wanted = QOP_BITS[self._settings.qop]
        if not offer[0] & wanted:
            offered = [name for name, bit in QOP_BITS.items() if offer[0] & bit]
            raise self._refused(
                f"the metastore offers QOP {', '.join(offered)}, this client asks for {self._settings.qop}; set "
                "kerberos_qop to the metastore's hadoop.rpc.protection"
            )
        self._qop = self._settings.qop
        choice = bytes([wanted]) + struct.pack("!I", _MAX_BUFFER)[1:]
        return bytes(self._context.wrap(choice, False).message)

    def _refused(self, why: str) -> AuthenticationError:
        self._inner.close()
        who = describe_client(self._settings.principal, self._settings.keytab)
        return AuthenticationError(
            f"Kerberos authentication to the Hive Metastore at {self._url} as {who} "
            f"for the service {self._service} failed: {why}. {advice(self._settings)}"
        )


class DigestSaslTransport(SaslTransport):
    """SASL DIGEST-MD5 with a delegation token on :meth:`open` (:mod:`.digest`), then messages framed, and
    signed or sealed where the QOP agreed asks (``qop``, else the metastore's first of ``auth``, ``auth-conf``,
    ``auth-int``)."""

    def __init__(self, inner: Any, token: DelegationToken, url: str, qop: str | None = None) -> None:
        super().__init__(inner)
        self._token = token
        self._url = url
        self._qop = qop
        self._layer: SecurityLayer | None = None
        self.qop: str | None = None  # the QOP agreed, once open

    def _wrap(self, data: bytes) -> bytes:
        return data if self._layer is None else self._layer.wrap(data)

    def _unwrap(self, data: bytes) -> bytes:
        if self._layer is None:
            return data
        try:
            return self._layer.unwrap(data)
        except ValueError as exc:  # the connection cannot go on: dropped, so the next call opens another
            raise TTransportException(TTransportException.UNKNOWN, f"{exc} ({self._url})") from None

    def open(self) -> None:
        mechanism = DigestMd5(self._token, self._qop)
        self._send(_START, MECHANISM)
        self._send(_OK, b"")
        try:
            status, challenge = self._receive()
            if status == _OK:
                self._send(_OK, mechanism.respond(challenge))
                status, challenge = self._receive()
            if status != _COMPLETE:
                text = challenge.decode("utf-8", "replace")
                raise ValueError(f"the metastore ended the SASL negotiation: status {status} ({text})")
            mechanism.verify(challenge)
            self._layer, self.qop = mechanism.layer, mechanism.qop
        except ValueError as exc:
            self._inner.close()
            raise AuthenticationError(
                f"delegation token authentication (DIGEST-MD5) to the Hive Metastore at {self._url} with "
                f"{self._token} failed: {exc}. The token may have expired or been cancelled: get a new one "
                "(Metastore.get_delegation_token, from a process with Kerberos credentials) or connect with "
                "Kerberos settings"
            ) from None


class PlainSaslTransport(SaslTransport):
    """SASL PLAIN (RFC 4616) on :meth:`open`: the user name and password in one message, answered ``COMPLETE``
    or refused; then messages framed, never wrapped (PLAIN has no security layer: TLS protects them)."""

    def __init__(self, inner: Any, settings: PlainSettings, url: str) -> None:
        super().__init__(inner)
        self._settings = settings
        self._url = url

    def open(self) -> None:
        user = self._settings.user.encode()
        self._send(_START, b"PLAIN")
        self._send(_COMPLETE, b"\0" + user + b"\0" + self._settings.password.encode())
        status, answer = self._receive()
        if status != _COMPLETE:
            self._inner.close()
            text = answer.decode("utf-8", "replace").replace(self._settings.password, "***")
            raise AuthenticationError(
                f"the Hive Metastore at {self._url} refused SASL PLAIN for the user {self._settings.user}: "
                f"{text or f'status {status}'}. Check plain_user and plain_password against the metastore's "
                "metastore.authentication (CONFIG: metastore.authentication.config.username and password; LDAP)"
            )


class KerberosLogin:
    """The caller's Kerberos credentials for a metastore connection (:class:`~acidstream.kerberos.KerberosCredentials`:
    from the keytab when one is set, else the ticket cache; obtained again whenever a new connection finds them
    expiring). A ticket expiring in the middle of a batch is so renewed from the keytab; from a ticket cache that
    expired, the next connection fails before its call is sent, :class:`NoCredentials` naming the metastore."""

    def __init__(self, settings: KerberosSettings) -> None:
        self.settings = settings
        self._credentials = KerberosCredentials(settings.principal, settings.keytab)

    def __repr__(self) -> str:
        return f"KerberosLogin({self._credentials.client})"

    def credentials(self, url: str) -> Any:
        try:
            return self._credentials.get()
        except LoginFailed as exc:
            raise NoCredentials(
                f"no Kerberos credentials for the Hive Metastore at {url} as {self._credentials.client}: {exc}. "
                f"{advice(self.settings)}"
            ) from None


def advice(settings: KerberosSettings) -> str:
    if settings.keytab:
        return (
            f"Check that the keytab holds current keys of {settings.principal} (klist -kt {settings.keytab}; "
            "kinit -kt tests it), and that kerberos_service_principal names the metastore's "
            "metastore.kerberos.principal"
        )
    return (
        "Run kinit (or set kerberos_principal and kerberos_keytab), and check that kerberos_service_principal "
        "names the metastore's metastore.kerberos.principal"
    )
