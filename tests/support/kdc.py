"""An MIT Kerberos KDC of the tests' own (scripts/kdc.sh), and the test process pointed at it.

The KDC's realm, database, keytabs and krb5.conf live in one directory; ``KRB5_CONFIG`` names its krb5.conf
for this process (and so for python-gssapi) while it runs, so the machine's ``/etc/krb5.conf`` is never read.
That krb5.conf's default ticket cache is a file in the same directory, empty until a test runs ``kinit``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KDC_SH = ROOT / "scripts" / "kdc.sh"
REALM = "ACIDSTREAM.TEST"


class KdcUnavailable(RuntimeError):
    """The KDC could not be installed or started here."""


@dataclass(frozen=True)
class Kdc:
    """A running KDC: its directory, realm and krb5.conf; the principals hive/localhost and alice have keytabs."""

    dir: Path
    realm: str

    @property
    def krb5_conf(self) -> Path:
        return self.dir / "krb5.conf"

    def keytab(self, name: str) -> Path:
        """A keytab for ``name`` with new keys (the principal is made if missing; older keytabs of it fail)."""
        return Path(_kdc_sh("keytab", str(self.dir), name))

    def maxlife(self, name: str, seconds: int) -> None:
        """Tickets of ``name`` live at most ``seconds`` from now on."""
        _kdc_sh("maxlife", str(self.dir), name, str(seconds))

    def kinit(self, principal: str, keytab: Path, ccache: Path, *, lifetime: str = "1h") -> None:
        """A ticket for ``principal`` in the ticket cache ``ccache``, as a user's ``kinit`` leaves one."""
        subprocess.run(
            ["kinit", "-l", lifetime, "-kt", str(keytab), f"{principal}@{self.realm}"],
            env=self._env(ccache),
            check=True,
            capture_output=True,
        )

    def has_ticket(self, ccache: Path) -> bool:
        """Whether ``ccache`` holds a ticket that has not expired (``klist -s``)."""
        return subprocess.run(["klist", "-s"], env=self._env(ccache), check=False).returncode == 0

    def _env(self, ccache: Path) -> dict[str, str]:
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5CCNAME": f"FILE:{ccache}"}


def _kdc_sh(*args: str) -> str:
    try:
        done = subprocess.run(["bash", str(KDC_SH), *args], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KdcUnavailable(f"scripts/kdc.sh {args[0]}: {exc}") from exc
    if done.returncode != 0:
        raise KdcUnavailable(f"scripts/kdc.sh {args[0]} failed: {done.stderr.strip()[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


@contextmanager
def kdc_server(directory: Path) -> Iterator[Kdc]:
    """The KDC started in ``directory`` (installed where missing) with ``KRB5_CONFIG`` set for this process
    meanwhile; stopped, and the variable restored, after."""
    krb5_conf = _kdc_sh("start", str(directory))
    previous = os.environ.get("KRB5_CONFIG")
    os.environ["KRB5_CONFIG"] = krb5_conf
    try:
        yield Kdc(directory.resolve(), REALM)
    finally:
        if previous is None:
            os.environ.pop("KRB5_CONFIG", None)
        else:
            os.environ["KRB5_CONFIG"] = previous
        _kdc_sh("stop", str(directory))
