"""The caller's Kerberos credentials, for the Hive Metastore's SASL/GSSAPI (``metastore/hive/sasl.py``) and
WebHDFS's SPNEGO (``webhdfs.py``) alike, on python-gssapi.

From a keytab, tickets are obtained into a ticket cache in memory (one per principal and keytab, shared by the
process's clients, so that each does not log in to the KDC again), the caller's own cache left alone; else from
the ticket cache ``kinit`` fills (``KRB5CCNAME``). Either way they are obtained again when a client finds them
near their end (:data:`EXPIRY_MARGIN`): from the keytab into a new cache, or from the ticket cache again, which
``kinit`` may have renewed meanwhile (an expired one fails there, before any request is sent). Nothing secret is
held here: a keytab stays a file name, tickets stay in the Kerberos library.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

#: Seconds of a ticket's life left below which a client does not rely on it: it is obtained again.
EXPIRY_MARGIN = 30.0


class LoginFailed(Exception):
    """Kerberos gave no credentials; the message says why (a missing keytab, no ticket, an expired one), for the
    caller's own error, which names the server and what to do."""


class KerberosCredentials:
    """The credentials of ``principal`` (None: the ticket cache's default one), from ``keytab`` when given:
    :meth:`get` them, obtained on first use and again near their end. Thread-safe."""

    def __init__(self, principal: str | None, keytab: str | None) -> None:
        self.principal, self.keytab = principal, keytab
        self._lock = threading.Lock()
        self._credentials: Any = None
        self._logins = 0

    def __repr__(self) -> str:
        return f"KerberosCredentials({self.client})"

    @property
    def client(self) -> str:
        """Who authenticates, and where the credentials come from, for messages."""
        return describe_client(self.principal, self.keytab)

    def get(self) -> Any:
        """The ``gssapi.Credentials`` to initiate with; :class:`LoginFailed` if Kerberos has none."""
        import gssapi

        with self._lock:
            if self._credentials is not None and lifetime(self._credentials) > EXPIRY_MARGIN:
                return self._credentials
            self._logins += 1
            kind = gssapi.NameType.kerberos_principal
            name = gssapi.Name(self.principal, kind) if self.principal else None
            try:
                if self.keytab is not None:
                    if not os.path.isfile(self.keytab):
                        raise LoginFailed(f"the keytab {self.keytab} does not exist")
                    key = hashlib.sha256(f"{self.principal}\0{self.keytab}".encode()).hexdigest()[:16]
                    store: dict[bytes | str, bytes | str] = {
                        "client_keytab": self.keytab,
                        "ccache": f"MEMORY:acidstream-{key}-{self._logins}",
                    }
                    credentials = gssapi.Credentials(name=name, usage="initiate", store=store)
                else:
                    credentials = gssapi.Credentials(name=name, usage="initiate")
                credentials.lifetime  # noqa: B018 (asks the library: an expired or missing ticket fails here)
            except gssapi.exceptions.GSSError as exc:
                raise LoginFailed(gss_text(exc)) from None
            self._credentials = credentials
            return credentials


def lifetime(credentials: Any) -> float:
    """Seconds ``credentials`` have left (0 once expired)."""
    import gssapi

    try:
        return float(credentials.lifetime)
    except gssapi.exceptions.GSSError:
        return 0.0


def describe_client(principal: str | None, keytab: str | None) -> str:
    """Who a client authenticates as, and from where, for messages: ``alice (keytab /etc/alice.keytab)``."""
    who = principal or "the ticket cache's default principal"
    source = (
        f"keytab {keytab}"
        if keytab
        else f"ticket cache {os.environ.get('KRB5CCNAME') or '(the default one)'}"
    )
    return f"{who} ({source})"


def gss_text(exc: Exception) -> str:
    """A GSSAPI error's own text (major and minor status), on one line."""
    text = getattr(exc, "gen_message", None)
    message = text() if callable(text) else str(exc)
    return " ".join(str(message).split())
