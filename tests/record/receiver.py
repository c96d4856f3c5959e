"""A real HTTP receiver on 127.0.0.1 for the webhook tests: it keeps every request and answers
with the status it is told to (or, stopped, does not answer at all)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """``requests`` holds (path, headers, body) of each request; ``status`` is the answer."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.status = 204
        self.location: str | None = None
        self._lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length)
                if len(data) < length:  # the sender died mid-body: no request, as on any server
                    self.close_connection = True
                    return
                with receiver._lock:
                    receiver.requests.append((self.path, dict(self.headers.items()), data))
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("location", receiver.location)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def bodies(self, path: str = "/hook") -> list[bytes]:
        with self._lock:
            return [body for p, _, body in self.requests if p == path]
