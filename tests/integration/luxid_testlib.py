"""Helpers for the luxid, jobproc and filter tests: a wconfd + luxid stack on one pair of
directories, and waits that follow jobs through wait_for_job_change (no sleeps).

Test files import it after putting this directory on sys.path (tests/integration has no
package of its own).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil

from client import LuxiClient, WConfdClient, errors

FINAL = ("success", "error", "canceled")
ADMIN_LOCKS = [
    ["cluster/BGL", "exclusive"],
    ["instance/[lockset]", "exclusive"],
    ["nodegroup/[lockset]", "exclusive"],
    ["node/[lockset]", "exclusive"],
    ["network/[lockset]", "exclusive"],
]


def delay(duration: float = 0.0, **params: Any) -> dict[str, Any]:
    """An OP_TEST_DELAY opcode."""
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **params}


class Stack:
    """wconfd and luxid on the same run/state dirs, with clients and job helpers."""

    def __init__(self, factory: Any, *luxid_args: str) -> None:
        self.wconfd = factory("wconfd", "--log-level", "DEBUG")
        self.luxid = factory("luxid", "--log-level", "DEBUG", *luxid_args)
        self.wconfd.start()
        self.luxid.start()
        self.lc = LuxiClient(self.luxid.socket, timeout=30)
        self.wc = WConfdClient(self.wconfd.socket, name="test-admin")

    def close(self) -> None:
        """Kill the jobs still running (no job process outlives the test) and disconnect."""
        with contextlib.suppress(errors.RpcError):
            for job_id, status in self.lc.query_jobs(ids=None, fields=["id", "status"]):
                if status not in FINAL:
                    self.lc.cancel_job(job_id=job_id, kill=True)
        self.lc.close()
        self.wc.close()

    # -- daemons -------------------------------------------------------------------------

    def restart_luxid(self, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with `kill`) and start luxid again."""
        self.lc.close()
        if kill:
            self.luxid.kill()
        else:
            self.luxid.stop()
        self.luxid.start()

    def restart_wconfd(self, kill: bool = False) -> None:
        self.wc.close()
        if kill:
            self.wconfd.kill()
        else:
            self.wconfd.stop()
        self.wconfd.start()
        self.wait_luxid_serving()

    def wait_luxid_serving(self, timeout: float = 30.0) -> None:
        """Until luxid serves again: on etcd its role is its wconfd's, so across a wconfd
        restart calls meet NotMaster ("retry in a moment") until wconfd confirms the term."""
        deadline = time.monotonic() + timeout
        while (role := self.lc.get_role()).role != "master":
            if time.monotonic() > deadline:
                raise AssertionError(f"luxid still {role} {timeout} s after wconfd restarted")
            time.sleep(0.05)

    # -- config --------------------------------------------------------------------------

    @contextlib.contextmanager
    def admin(self) -> Iterator[WConfdClient]:
        """A wconfd client holding every lock needed to write any object (then freed)."""
        with WConfdClient(self.wconfd.socket, name="test-writer") as wc:
            wc.update_locks_waiting(ADMIN_LOCKS, timeout=30)
            try:
                yield wc
            finally:
                wc.free_locks()

    def set_cluster(self, **fields: Any) -> None:
        with self.admin() as wc:
            cluster = wc.get_object("cluster")
            cluster.update(fields)
            wc.update_object("cluster", cluster)

    def add_nodes(self, *names: str) -> None:
        with self.admin() as wc:
            for name in names:
                wc.add_object("node", {"name": name})

    # -- jobs ----------------------------------------------------------------------------

    def submit(self, *ops: dict[str, Any]) -> int:
        return int(self.lc.submit_job(ops=list(ops)))

    def field(self, job_id: int, name: str) -> Any:
        (row,) = self.lc.query_jobs(ids=[job_id], fields=[name])
        assert row is not None, f"job {job_id} unknown"
        return row[0]

    def status(self, job_id: int) -> str:
        return str(self.field(job_id, "status"))

    def wait_for(
        self,
        job_id: int,
        accept: Callable[[list[Any]], bool],
        fields: tuple[str, ...] = ("status",),
        timeout: float = 30.0,
    ) -> list[Any]:
        """Follow the job with wait_for_job_change until `accept(values)`; the values."""
        deadline = time.monotonic() + timeout
        prev: list[Any] | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"job {job_id}: still {prev} after {timeout} s")
            answer = self.lc.wait_for_job_change(
                job_id=job_id, fields=list(fields), prev_values=prev,
                prev_log_serial=10**9, timeout=min(left, 5.0),
            )  # fmt: skip
            if answer == "nochange":
                continue
            prev = answer.values
            if accept(prev):
                return prev
            if fields[0] == "status" and prev[0] in FINAL:
                raise AssertionError(f"job {job_id} ended {prev} while waiting")

    def wait_status(self, job_id: int, *statuses: str, timeout: float = 30.0) -> str:
        """Until the job's status is one of `statuses`; that status."""
        return str(self.wait_for(job_id, lambda v: v[0] in statuses, timeout=timeout)[0])

    def wait_final(self, job_id: int, timeout: float = 30.0) -> str:
        return self.wait_status(job_id, *FINAL, timeout=timeout)

    def wait_op_running(self, job_id: int, index: int = 0, timeout: float = 30.0) -> None:
        self.wait_for(
            job_id,
            lambda v: v[1][index] == "running",
            fields=("status", "opstatus"),
            timeout=timeout,
        )

    @staticmethod
    def until(check: Callable[[], Any], timeout: float = 10.0, step: float = 0.01) -> Any:
        """Poll `check` (for state outside luxid: processes, wconfd locks) until truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {check}")
            time.sleep(step)

    # -- wconfd views --------------------------------------------------------------------

    def job_locks(self) -> dict[str, list[str]]:
        """Every lock held by a job client: lock -> client ids."""
        out: dict[str, list[str]] = {}
        for info in self.wc.list_all_locks().locks:
            owners = [o.client_id for o in info.owners if o.client_id.startswith("job-")]
            if owners:
                out[info.name] = owners
        return out

    def job_pending(self) -> list[str]:
        return [
            p.client_id for p in self.wc.list_all_locks().pending if p.client_id.startswith("job-")
        ]


def process_alive(pid: int) -> bool:
    """True while `pid` runs (zombies count as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill9(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def raises(exc_type: type[errors.RpcError], call: Callable[..., Any], **kwargs: Any) -> Any:
    """Call and expect `exc_type` with the matching data.type; the error."""
    try:
        call(**kwargs)
    except exc_type as exc:
        assert exc.data["type"] == exc_type.__name__
        return exc
    raise AssertionError(f"{call} did not raise {exc_type.__name__}")
