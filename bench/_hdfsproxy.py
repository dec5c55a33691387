"""Counting proxies in front of a MiniDFSCluster's NameNode, in a child process: what each client asks of HDFS.

* WebHDFS (acidstream, and pyarrow through the same filesystem): an HTTP proxy in front of the NameNode's HTTP
  port. It counts each request by its ``op`` (``CREATE``, ``APPEND``, ``GETFILESTATUS``, ``LISTSTATUS``,
  ``MKDIRS``, ``RENAME``, ``DELETE``, ``OPEN`` ...), and rewrites the NameNode's redirects to a DataNode (a
  CREATE, APPEND or OPEN sends the bytes there) to pass through it too, counted as ``DN``.
* Hadoop RPC (deltalake's native HDFS client): a TCP relay in front of the NameNode's RPC port that counts each
  call by its method (``create``, ``addBlock``, ``complete``, ``getFileInfo``, ``getListing`` ...), read from the
  frame's request header; connection set-up frames (negative call ids) are not counted. That client streams
  block data to the DataNode directly, which is not counted.

``GET /_counts`` on the HTTP port (not counted) answers the counts so far as JSON.

    python bench/_hdfsproxy.py NAMENODE_HTTP_PORT NAMENODE_RPC_PORT HTTP_PORT RPC_PORT   # serves until killed
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from _s3server import S3Server

HDFS_SH = Path(__file__).resolve().parents[1] / "scripts" / "hdfs.sh"

COUNTS: Counter[str] = Counter()
LOCK = threading.Lock()
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def count(kind: str) -> None:
    with LOCK:
        COUNTS[kind] += 1


def web_handler(namenode: int, port: int) -> type[BaseHTTPRequestHandler]:
    """Requests to ``/_to/HOST:PORT/...`` go to that DataNode, all others to the NameNode's HTTP port."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else a response's headers and body wait out a delayed ACK (40 ms)

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _forward(self) -> None:
            if self.path == "/_counts":
                with LOCK:
                    self._answer(200, [("Content-Type", "application/json")], json.dumps(COUNTS).encode())
                return
            if self.path.startswith("/_to/"):
                target, path = self.path[len("/_to/") :].split("/", 1)
                host, target_port = target.rsplit(":", 1)
                backend, path, kind = (host, int(target_port)), "/" + path, "DN"
            else:
                query = parse_qs(urlsplit(self.path).query)
                backend, path = ("127.0.0.1", namenode), self.path
                kind = query.get("op", ["?"])[0].upper()
            count(kind)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            conn = http.client.HTTPConnection(*backend, timeout=300)
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.request(self.command, path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                out = []
                for k, v in answer.getheaders():
                    if k.lower() == "location":
                        parts = urlsplit(v)
                        v = f"http://127.0.0.1:{port}/_to/{parts.netloc}{parts.path}?{parts.query}"
                    if k.lower() not in HOP_HEADERS:
                        out.append((k, v))
                self._answer(answer.status, out, data)
            finally:
                conn.close()

        def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = _forward

    return Handler


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(buf: bytes) -> dict[int, int | bytes]:
    """The varint and length-delimited fields of one protobuf message (all a request header holds)."""
    fields: dict[int, int | bytes] = {}
    at = 0
    while at < len(buf):
        tag, at = _varint(buf, at)
        if tag & 7 == 0:
            fields[tag >> 3], at = _varint(buf, at)
        elif tag & 7 == 2:
            size, at = _varint(buf, at)
            fields[tag >> 3], at = buf[at : at + size], at + size
        else:
            raise ValueError(f"unexpected wire type {tag & 7}")
    return fields


def rpc_method(frame: bytes) -> str | None:
    """The method a Hadoop RPC frame calls: RpcRequestHeaderProto (call id: field 3, zigzag) and then
    RequestHeaderProto (method name: field 1), each length-delimited; None for set-up frames."""
    size, at = _varint(frame, 0)
    header = _fields(frame[at : at + size])
    call_id = header.get(3, 0)
    assert isinstance(call_id, int)
    if (call_id >> 1) ^ -(call_id & 1) < 0:
        return None
    size, at = _varint(frame, at + size)
    name = _fields(frame[at : at + size]).get(1, b"?")
    return name.decode() if isinstance(name, bytes) else "?"


def rpc_handler(namenode: int) -> type[socketserver.BaseRequestHandler]:
    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            server = socket.create_connection(("127.0.0.1", namenode))
            for end in (client, server):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            back = threading.Thread(target=_pipe, args=(server, client), daemon=True)
            back.start()
            try:
                reader = client.makefile("rb")
                preamble = reader.read(7)  # "hrpc", version, service class, auth protocol
                server.sendall(preamble)
                while True:
                    head = reader.read(4)
                    if len(head) < 4:
                        break
                    frame = reader.read(int.from_bytes(head, "big"))
                    method = rpc_method(frame)
                    if method is not None:
                        count(method)
                    server.sendall(head + frame)
            finally:
                server.close()
                back.join(5)

    return Relay


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def serve(nn_http: int, nn_rpc: int, http_port: int, rpc_port: int) -> None:
    socketserver.ThreadingTCPServer.daemon_threads = True
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    rpc = socketserver.ThreadingTCPServer(("127.0.0.1", rpc_port), rpc_handler(nn_rpc))
    threading.Thread(target=rpc.serve_forever, daemon=True).start()
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", http_port), web_handler(nn_http, http_port)).serve_forever()


class HdfsCluster(S3Server):
    """A running MiniDFSCluster behind the proxies: counted through the same ``/_counts`` as the S3 server.
    ``uri`` names the RPC relay, which deltalake dials; acidstream's WebHDFS port is set in the environment."""

    def __init__(self, endpoint: str, uri: str) -> None:
        super().__init__(endpoint)
        self.uri = uri

    def storage_options(self) -> dict[str, str]:
        return {}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _hdfs_sh(*args: str) -> str:
    done = subprocess.run(["bash", str(HDFS_SH), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/hdfs.sh {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip()


@contextmanager
def hdfs_cluster() -> Iterator[HdfsCluster]:
    """Start a MiniDFSCluster (``scripts/hdfs.sh``) and the proxies in front of it, and point this process's
    ``$ACIDSTREAM_WEBHDFS_PORT`` at the WebHDFS proxy."""
    _hdfs_sh("fetch")
    with tempfile.TemporaryDirectory(prefix="bench_minihdfs_") as state:
        _hdfs_sh("start", state)
        child = None
        try:
            nn_rpc, nn_http, _ = (Path(state) / "ports").read_text().split()
            http_port, rpc_port = _free_port(), _free_port()
            child = subprocess.Popen(
                [sys.executable, __file__, nn_http, nn_rpc, str(http_port), str(rpc_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            cluster = HdfsCluster(f"http://127.0.0.1:{http_port}", f"hdfs://127.0.0.1:{rpc_port}")
            deadline = time.monotonic() + 30
            while True:
                try:
                    cluster.counts()
                    break
                except OSError:
                    if child.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the HDFS proxy did not start (exit {child.poll()})") from None
                    time.sleep(0.2)
            os.environ["ACIDSTREAM_WEBHDFS_PORT"] = str(http_port)
            yield cluster
        finally:
            if child is not None:
                child.kill()
                child.wait()
            _hdfs_sh("stop", state)


if __name__ == "__main__":
    serve(*(int(a) for a in sys.argv[1:5]))
