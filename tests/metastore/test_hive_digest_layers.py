"""DIGEST-MD5's security layers (RFC 2831) against the JDK's own DIGEST-MD5 server, the one a Hive Metastore
authenticates delegation tokens with: integrity (auth-int) and confidentiality (auth-conf) with each cipher Java's
server offers (the offer cut, as a server without the stronger ones would send it, so that the client picks each
in turn), messages of every length class each way, and an altered answer refused."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.metastore.hive.digest import CIPHERS, DelegationToken, DigestMd5

SERVER = Path(__file__).parent / "java" / "DigestMd5Server.java"
IDENTIFIER, PASSWORD = b"\x00\x05alice\x04hive\x00token-id", b"token-password\xff\x01"
MESSAGES = [b"x", b"1234567", b"12345678", b"123456789", bytes(range(256)) * 300]


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = f"{home}/bin/java" if home else shutil.which("java")
    if not found:
        if os.environ.get("CI"):
            pytest.fail("no java under CI")
        pytest.skip("no java")
    return found


@pytest.fixture
def token() -> DelegationToken:
    fields = (IDENTIFIER, PASSWORD, b"HIVE_DELEGATION_TOKEN", b"")
    return DelegationToken(base64.urlsafe_b64encode(b"".join(bytes([len(f)]) + f for f in fields)).decode())


class JavaServer:
    """The JDK's DIGEST-MD5 server in a process of its own, one line each way: one session after another."""

    def __init__(self) -> None:
        user, password = base64.b64encode(IDENTIFIER).decode(), base64.b64encode(PASSWORD).decode()
        command = [java(), str(SERVER), user, password]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(self, qop: str) -> None:
        """A new session, with ``qop``."""
        self._line(qop)

    def end(self) -> None:
        self._line("")

    def send(self, data: bytes) -> None:
        self._line(data.hex())

    def _line(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def receive(self) -> bytes:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the Java server ended ({self.process.wait()})"
        return bytes.fromhex(line.strip())

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[JavaServer]:
    started = JavaServer()
    yield started
    started.close()


#: Java's offer: the five ciphers its server has, strongest first, in the order this client ranks them too.
OFFER = f'cipher="{",".join(CIPHERS)}"'.encode()


@pytest.mark.parametrize(
    ("qop", "cipher"),
    [("auth-int", None), *(("auth-conf", c) for c in CIPHERS)],
)
def test_javas_server_takes_and_answers_each_layer(
    token: DelegationToken, server: JavaServer, qop: str, cipher: str | None
) -> None:
    server.start(qop)
    client = DigestMd5(token, qop)
    challenge = server.receive()
    if cipher is not None:  # the offer from ``cipher`` on: the client picks the first it has
        assert OFFER in challenge
        offered = ",".join(CIPHERS[CIPHERS.index(cipher) :])
        challenge = challenge.replace(OFFER, f'cipher="{offered}"'.encode())
    response = client.respond(challenge)
    assert (f"cipher={cipher}".encode() in response) == (cipher is not None)
    server.send(response)
    client.verify(server.receive())
    assert client.qop == qop and client.layer is not None
    for message in MESSAGES:
        wrapped = client.layer.wrap(message)
        assert message not in wrapped or cipher is None  # sealed
        server.send(wrapped)
        assert client.layer.unwrap(server.receive()) == message[::-1]
    server.send(client.layer.wrap(b"once more"))
    answer = bytearray(server.receive())
    answer[0] ^= 1
    server.end()
    with pytest.raises(ValueError, match=r"MAC does not match|bad padding"):
        client.layer.unwrap(bytes(answer))
