"""Identified clients of wconfd (docs/contracts.md#client-identification): who is on each
connection, checked by the kernel.

A client is a process identity `(job_id or name, pid, start_time)`; its locks and
reservations belong to that identity, not to a connection.  Several connections may
share one client; a client holding nothing is forgotten when its last connection closes,
and a client whose process dies is reported to `on_death` by the process watcher.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from client._server.procwatch import ProcessWatcher
from client._server.server import Connection
from client.errors import IdentityMismatch, InvalidParams, NotIdentified
from client.identity import START_TIME_TOLERANCE, ProcessKey, start_time_of
from client.names import CLIENT_NAME_RULE, is_client_name

log = logging.getLogger(__name__)


def make_client_id(job_id: int | None, name: str | None, pid: int, start_time: float) -> str:
    """The stable id of an identity: the same after a daemon restart."""
    who = f"job-{job_id}" if job_id is not None else (name or "client")
    return f"{who}:{pid}:{start_time:.2f}"


def parse_client_id(client_id: str) -> tuple[int | None, str | None, ProcessKey]:
    """(job_id, name, process) from a client id; ValueError if it is not one."""
    who, pid, start = client_id.rsplit(":", 2)
    key = ProcessKey(int(pid), float(start))
    if who.startswith("job-") and who[4:].isdigit():
        return int(who[4:]), None, key
    return None, who, key


class Client:
    """One identified process and the connections it has open."""

    __slots__ = ("client_id", "connections", "job_id", "key", "name")

    def __init__(
        self, client_id: str, job_id: int | None, name: str | None, key: ProcessKey
    ) -> None:
        self.client_id = client_id
        self.job_id = job_id
        self.name = name
        self.key = key
        self.connections: set[Connection] = set()


class ClientRegistry:
    """Identifies connections and tracks the life of the processes behind them.

    `holds_anything(client_id)` tells whether a client with no connection must be kept
    (it still owns locks or reservations); `on_death(client_id)` releases what it owned.
    """

    def __init__(
        self,
        holds_anything: Callable[[str], bool],
        on_death: Callable[[str], None],
        sweep_interval: float = 5.0,
    ) -> None:
        self.clients: dict[str, Client] = {}
        self._by_key: dict[ProcessKey, str] = {}
        self._holds_anything = holds_anything
        self._on_death = on_death
        self.watcher = ProcessWatcher(self._process_died, sweep_interval)

    def identify(
        self, conn: Connection, job_id: int | None, pid: int, start_time: float, name: str | None
    ) -> Client:
        """Check the claimed identity against the socket peer and attach it to `conn`."""
        if job_id is not None and job_id <= 0:
            raise InvalidParams(f"param `job_id`: must be a positive job id, got {job_id}")
        if name is not None and not is_client_name(name):
            raise InvalidParams(
                f"param `name`: {name!r} is not a client name ({CLIENT_NAME_RULE})",
                {"param": "name"},
            )
        if pid != conn.peer.pid:
            raise IdentityMismatch(
                f"pid {pid} is not the connecting process (the socket peer is pid {conn.peer.pid})"
            )
        actual = start_time_of(pid)
        if actual is None or abs(actual - start_time) > START_TIME_TOLERANCE:
            raise IdentityMismatch(
                f"start_time {start_time} does not match process {pid} (started at {actual}); "
                "send psutil.Process(pid).create_time()"
            )
        client_id = make_client_id(job_id, name, pid, start_time)
        current: Client | None = conn.session
        if current is not None:
            if current.client_id != client_id:
                raise InvalidParams(
                    f"this connection is already identified as {current.client_id}; "
                    "open a new connection for another identity"
                )
            return current
        client = self.clients.get(client_id)
        if client is None:
            client = self.adopt(client_id, job_id, name, ProcessKey(pid, start_time))
        client.connections.add(conn)
        conn.session = client
        return client

    def adopt(
        self, client_id: str, job_id: int | None, name: str | None, key: ProcessKey
    ) -> Client:
        """Register a client (at identify, or restored from disk) and watch its process."""
        client = Client(client_id, job_id, name, key)
        self.clients[client_id] = client
        self._by_key[key] = client_id
        self.watcher.watch(key)
        return client

    @staticmethod
    def require(conn: Connection) -> Client:
        """The connection's client, or NotIdentified."""
        client: Client | None = conn.session
        if client is None:
            raise NotIdentified(
                "call identify(job_id, pid, start_time, name) first on this connection"
            )
        return client

    def disconnected(self, conn: Connection) -> None:
        """Forget `conn`; forget its client too if that was its last connection and it holds nothing."""
        client: Client | None = conn.session
        if client is None:
            return
        client.connections.discard(conn)
        if not client.connections and not self._holds_anything(client.client_id):
            self.forget(client.client_id)

    def forget(self, client_id: str) -> None:
        """Drop a client and stop watching its process."""
        client = self.clients.pop(client_id, None)
        if client is not None:
            self._by_key.pop(client.key, None)
            self.watcher.unwatch(client.key)

    def sweep(self) -> list[str]:
        """Run the death check now; the ids of the clients found dead."""
        known = dict(self._by_key)
        return [known[key] for key in self.watcher.sweep() if key in known]

    def _process_died(self, key: ProcessKey) -> None:
        client_id = self._by_key.pop(key, None)
        if client_id is None:
            return
        client = self.clients.pop(client_id, None)
        log.info("client %r died; releasing what it held", client_id)
        if client is not None:
            for conn in client.connections:
                conn.session = None
        self._on_death(client_id)
