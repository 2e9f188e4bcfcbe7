"""`DaemonOpContext`: the OpContext (jobproc.opcodes.context) a job process gives each of
its opcodes, backed by the daemons: config and reservations through the job's wconfd
stub, log and job submission through luxid, an interruptible sleep.

This is what job code really talks to.  Opcodes are written against the protocol
(`OpContext`, `ConfigReader`, `ConfigWriter` in jobproc.opcodes.context), so the tests
run them on an in-memory fake instead (tests/unit/opcodes/fakes.py).

Opcodes are synchronous and run on the job process's one thread; their calls are
blocking calls of the job's sync stubs (signal handlers run during them:
jobproc.signals).  Only an interruptible sleep runs the job's event loop (`Run`, the
loop's run_until_complete), so that a cancel ends it at once.  One connection per
daemon serves the whole job.  Results of wconfd are msgspec Structs or JSON; opcodes get
plain dicts, and wconfd's errors reach them unchanged (`client.errors`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import msgspec

from client import LuxiClient, WConfdClient
from client.api.luxi import Log
from client.api.wconfd import Kind
from client.capacity import Room
from jobproc.opcodes.context import ConfigObject
from jobproc.opcodes.errors import Canceled, OpExecError
from jobproc.signals import JobSignals

Report = Callable[[Any], Any]
Run = Callable[[Awaitable[Any]], Any]
"""Runs an awaitable on the job's event loop to its end: the loop's run_until_complete."""


class DaemonOpContext:
    """The OpContext of opcode `index` of a job, over the job's wconfd and luxid stubs."""

    def __init__(
        self,
        run: Run,
        job_id: int,
        index: int,
        priority: int,
        wconfd: WConfdClient,
        luxi: LuxiClient,
        report: Report,
        signals: JobSignals,
        interruptible: bool,
    ) -> None:
        self._run = run
        self._job_id = job_id
        self._index = index
        self._priority = priority
        self._wconfd = wconfd
        self._luxi = luxi
        self._report = report
        self._signals = signals
        self._interruptible = interruptible
        self._log_seq = 0
        self.reserved = False  # whether the opcode reserved anything in wconfd

    # -- OpContext: identity --------------------------------------------------------------

    @property
    def job_id(self) -> int:
        return self._job_id

    @property
    def priority(self) -> int:
        return self._priority

    def set_priority(self, priority: int) -> None:
        """The opcode runs at this priority (raised while it waited for its locks)."""
        self._priority = priority

    # -- ConfigReader / ConfigWriter ------------------------------------------------------

    def get_object(self, kind: str, key: str) -> ConfigObject:
        return _plain(self._wconfd.get_object(kind=_kind(kind), key=key))

    def list_objects(self, kind: str) -> list[ConfigObject]:
        return [_plain(o) for o in self._wconfd.list_objects(kind=_kind(kind))]

    def node_rooms(self, nodes: Sequence[str] | None = None) -> dict[str, Room]:
        answer = self._wconfd.get_node_rooms(nodes=None if nodes is None else list(nodes))
        return {
            r.uuid: Room(r.uuid, r.name, r.mtotal, r.ctotal, r.vcpu_ratio, r.mused, r.cused,
                         r.eligible)
            for r in answer
        }  # fmt: skip

    def add_object(self, kind: str, obj: Mapping[str, Any]) -> ConfigObject:
        return _plain(self._wconfd.add_object(kind=_kind(kind), object=dict(obj)))

    def update_object(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        return _plain(self._wconfd.update_object(kind=_kind(kind), object=dict(obj)))

    def remove_object(self, kind: str, key: str) -> None:
        self._wconfd.remove_object(kind=_kind(kind), key=key)

    def generate_mac(self) -> str:
        self.reserved = True
        return str(self._wconfd.generate_mac())

    def reserve(self, namespace: str, value: str) -> None:
        self.reserved = True
        self._wconfd.reserve(namespace=namespace, value=value)

    # -- OpContext: the job -----------------------------------------------------------------

    def log(self, message: str, type: str = "message") -> None:
        seq, self._log_seq = self._log_seq, self._log_seq + 1
        self._report(Log(index=self._index, seq=seq, type=type, message=message))

    def sleep(self, seconds: float) -> None:
        """Wait; an interruptible opcode stops at once when the job is canceled."""
        if not self._interruptible:
            time.sleep(seconds)
        elif self._signals.canceled.is_set() or (
            seconds > 0 and self._run(self._signals.sleep(seconds))
        ):
            raise Canceled()

    def submit_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[int]:
        answers = self._luxi.submit_many_jobs(jobs=jobs)
        refused = [f"job {i}: {msg}" for i, (ok, msg) in enumerate(answers) if not ok]
        if refused:
            raise OpExecError("luxid refused submitted jobs: " + "; ".join(refused))
        return [int(job_id) for _, job_id in answers]


def _kind(kind: str) -> Kind:
    """An opcode's object kind as the stub's declared type (wconfd checks it: an unknown
    kind is InvalidParams, which fails the opcode)."""
    return cast(Kind, kind)


def _plain(value: Any) -> Any:
    """A wconfd answer as plain JSON values (dicts, lists) for the opcode."""
    return msgspec.to_builtins(value) if isinstance(value, msgspec.Struct) else value
