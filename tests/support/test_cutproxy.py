"""The cut proxy itself: a cut refuses connections as a dead server's port does, and a restore listens again
on the same port, whether or not anything tried to connect meanwhile."""

from __future__ import annotations

import socket

import pytest

from support.cutproxy import cut_proxy


def test_a_cut_refuses_connections_and_a_restore_listens_again_on_the_same_port() -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        cut_proxy(f"http://127.0.0.1:{server.getsockname()[1]}") as proxy,
    ):
        proxy.cut()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port)).close()
        proxy.restore()
        with socket.create_connection(("127.0.0.1", proxy.port)) as client:
            client.sendall(b"x")
            conn, _ = server.accept()
            with conn:
                assert conn.recv(1) == b"x"
