"""A node's role in the control plane (docs/contracts.md#replicated-control-plane) and
the one check that enforces it.

Every daemon has a `Role`: on local files it is `SingleNode` (always master, term 0); on
etcd, wconfd's election decides it (wconfd/ha.py). The dispatch table
(`client._server.dispatch.build_methods(..., role=...)`) asks `serving` before every call and
answers NotMaster for every method but `STANDBY_METHODS` while the node does not serve, so
no method checks the role itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

from client.api.common import RoleInfo
from client.errors import NotMaster, RpcError

STANDBY_METHODS: Final = frozenset({"ping", "version", "identify", "get_role"})
"""What a standby still answers: everything else is NotMaster."""


def default_node_name() -> str:
    """`--node`'s default: $LW_NODE, else the host name."""
    return os.environ.get("LW_NODE") or socket.gethostname()


class Role(Protocol):
    """What the dispatch and `get_role` need to know of the node's role."""

    @property
    def serving(self) -> bool:
        """Whether this node answers every call now (it is the master, state loaded)."""
        ...

    def info(self) -> RoleInfo:
        """The node's role as `get_role` answers it."""
        ...

    async def settle(self) -> None:
        """Called before a call is refused NotMaster: wait briefly while the role is in
        doubt (taking over, proving a lease after a pause) and learn the master anew, so
        that the NotMaster names the right node (docs/operations.md#stalls)."""
        ...


class SingleNode:
    """The role of a daemon on local storage: the only node, always master (term 0)."""

    def __init__(self, node: str | None = None) -> None:
        self.node = node or default_node_name()

    @property
    def serving(self) -> bool:
        return True

    def info(self) -> RoleInfo:
        return RoleInfo(node=self.node, role="master", master=self.node, term=0)

    async def settle(self) -> None:
        """Nothing to wait for: the single node always serves."""


class SharedRead:
    """A read of who the master is, for `Role.settle`: one read serves every caller that
    asks while it runs, and none starts within `min_interval` of the last, so clients
    retrying against a standby during an election do not turn into a storm of etcd reads."""

    def __init__(
        self,
        read: Callable[[], Coroutine[Any, Any, object]],
        min_interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read
        self.min_interval = min_interval
        self.clock = clock
        self._last = -min_interval
        self._task: asyncio.Task[object] | None = None

    async def __call__(self, timeout: float) -> None:
        """Read (or join the read under way), waiting `timeout` seconds at most; a read
        that fails or is late leaves things as they were."""
        if self._task is None or self._task.done():
            if self.clock() - self._last < self.min_interval:
                return
            self._last = self.clock()
            self._task = asyncio.get_running_loop().create_task(self.read())
            self._task.add_done_callback(_retrieve)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), timeout)


def _retrieve(task: asyncio.Task[object]) -> None:
    """A failed shared read is nobody's error: mark it seen."""
    if not task.cancelled():
        task.exception()


async def settled_not_master(role: Role) -> NotMaster:
    """`not_master` once the role has settled (`Role.settle`, run in a task of its own: the
    server may run a call's first step outside any task, where asyncio's timeouts cannot
    work); the caller checks `serving` again if it may still serve."""
    await asyncio.get_running_loop().create_task(role.settle())
    return not_master(role)


def not_master(role: Role) -> NotMaster:
    """The error a standby answers, naming the master it knows of: never itself (a node
    that holds the key without serving is taking over or giving up)."""
    info = role.info()
    if info.master == info.node:
        master = None
        text = "it is taking over or giving up the master role; retry in a moment"
    elif info.master is None:
        master = None
        text = "there is no master right now (an election is under way); retry in a few seconds"
    else:
        master = info.master
        text = f"the master is {master}; send the call there"
    return NotMaster(f"node {info.node} is not the master; {text}", {"master": master})


class Superseded(Exception):
    """A call that waited for the node's role to settle found it serving: the table its
    handler belongs to may predate the term (a new master installs a table over the state
    it loaded), so the call goes to the handler the table has now.  `refusal`: the answer
    if the role keeps changing under it (client._server.dispatch hands a call over at most
    three times).  The metrics do not count the superseded attempt: the answer is counted
    by the handler that gives it."""

    def __init__(self, refusal: RpcError) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
