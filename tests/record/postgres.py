"""A private PostgreSQL server for the tests: Debian's ``postgresql`` package, initialised in
a temp dir and run on a loopback port. PostgreSQL refuses to run as root, so when the tests run
as root the server runs as the ``postgres`` system user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def binary(name: str) -> str | None:
    """The path of PostgreSQL program ``name``, or None when PostgreSQL is not installed."""
    for directory in BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres() -> tuple[Callable[[], None] | None, int, int]:
    if os.getuid() != 0:
        return None, os.getuid(), os.getgid()
    user = pwd.getpwnam("postgres")

    def drop() -> None:
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    return drop, user.pw_uid, user.pw_gid


class PostgresServer:
    """One PostgreSQL server; ``stop()`` and ``start()`` restart it on the same port."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="lazarus-pg-"))
        self.port = _free_port()
        self._drop, uid, gid = _as_postgres()
        os.chown(self.dir, uid, gid)
        self.data = self.dir / "data"
        self._process: subprocess.Popen[bytes] | None = None
        initdb = binary("initdb")
        assert initdb, "PostgreSQL is not installed (apt-get install postgresql)"
        subprocess.run(
            [initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync"],
            check=True, capture_output=True, preexec_fn=self._drop,
        )  # fmt: skip

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        postgres = binary("postgres")
        assert postgres
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 (the server keeps writing it)
        self._process = subprocess.Popen(
            [postgres, "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
             "-k", str(self.dir), "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200"],
            stdout=log, stderr=log, preexec_fn=self._drop,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                if self._ready():
                    return
            assert self._process.poll() is None, (self.dir / "server.log").read_text()
            time.sleep(0.05)
        raise RuntimeError("PostgreSQL did not start in 30 s")

    def _ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url(), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def stop(self) -> None:
        if self._process is not None:
            # SIGTERM is a smart shutdown, which waits for every client to leave; SIGINT is
            # the fast one: clients are disconnected, as in a restart.
            self._process.send_signal(signal.SIGINT)
            self._process.wait(30)
            self._process = None

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
