"""Hive Metastore delegation tokens: got by a process with Kerberos credentials, used by processes without.

``get_delegation_token`` asks for a token owned by the caller's own Kerberos principal and renewable by it (the
driver of a long Spark query renews the tokens its executors use); ``renew`` pushes its expiry on, ``cancel`` ends
it at once. A client connected with ``delegation_token`` authenticates with it over DIGEST-MD5
(:mod:`acidstream.metastore.hive.digest`); the metastore refuses to hand out tokens over a token.
"""

from __future__ import annotations

from acidstream.errors import AuthenticationError
from acidstream.metastore.hive.digest import DelegationToken
from acidstream.metastore.hive.host import HiveHost


class HiveDelegationTokens(HiveHost):
    """The delegation token calls of :class:`~acidstream.metastore.hive.client.HiveMetastoreClient`."""

    def get_delegation_token(self, renewer: str | None = None) -> DelegationToken:
        """A new token for this client's Kerberos principal, renewable by ``renewer`` (by default that principal
        too); :class:`AuthenticationError` for a client without Kerberos credentials."""
        login = self.connection.login
        if login is None or self.connection.token is not None:
            raise AuthenticationError(
                f"a delegation token of the Hive Metastore at {self.url} is handed out only to a client "
                "authenticated by Kerberos: connect with Kerberos settings (kerberos=True, or kerberos_principal "
                "and kerberos_keytab), without delegation_token"
            )
        owner = str(login.credentials(self.url).name)
        text = self._call("get_delegation_token", owner, renewer or owner, idempotent=False)
        return DelegationToken(text)

    def renew_delegation_token(self, token: DelegationToken) -> float:
        """Push ``token``'s expiry on (by the metastore's renew interval, within its maximum lifetime): the new
        expiry, in seconds since the epoch."""
        expiry_ms = self._call("renew_delegation_token", token.text)
        return float(expiry_ms) / 1000

    def cancel_delegation_token(self, token: DelegationToken) -> None:
        """End ``token`` now: a connection made with it from now on is refused."""
        self._call("cancel_delegation_token", token.text, idempotent=False)
