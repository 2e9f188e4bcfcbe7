"""What the audit log costs (docs/contracts.md#audit-log; target: auditing lowers neither
`submit_job`/s nor `update_object`/s by more than 10 %).

Two stacks on temporary directories run side by side, one as shipped and one whose wconfd
and luxid are started with `--no-audit` (which exists only for this measurement).  Rounds
alternate between them, in ABBA order, so both see the same machine; each figure is the
median of the rounds.  Measured per stack:
`submit_job`/s of one client calling back to back and of one asyncio client with 64 calls
in flight (jobs held by a PAUSE rule, so none runs), and `update_object`/s of one client
updating one node back to back.  Printed with the ratio audited / not audited.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# This folder holds queue.py: put it last so the stdlib's queue wins; _util is still found.
sys.path.append(sys.path.pop(0))

from _luxid import DELAY0, PAUSE_ALL, pipelined_submit_rate, stack

from client import LuxiClient, WConfdClient

ALL_NODES = [["node/[lockset]", "exclusive"]]


def rate(call: Callable[[], object], seconds: float) -> float:
    """Calls per second of `call` made back to back for `seconds`."""
    done, stop = 0, time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < stop:
        call()
        done += 1
    return done / (time.perf_counter() - start)


class Subject:
    """One stack's clients and the three measurements."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.lc = LuxiClient(run / "luxid.sock", actor="cli:bench")
        self.lc.replace_filter(uuid=None, **PAUSE_ALL)
        self.wc = WConfdClient(run / "wconfd.sock", name="bench", actor="cli:bench")
        self.wc.update_locks_waiting(ALL_NODES, timeout=30)
        self.node = self.wc.add_object("node", {"name": "bench-node"})

    def submit_rate(self, seconds: float) -> float:
        return rate(lambda: self.lc.submit_job(ops=[DELAY0]), seconds)

    def pipelined_rate(self, seconds: float) -> float:
        return pipelined_submit_rate(self.run / "luxid.sock", seconds)

    def update_rate(self, seconds: float) -> float:
        def update() -> None:
            self.node["vm_capable"] = not self.node.get("vm_capable", True)
            result = self.wc.update_object("node", self.node)
            self.node["serial_no"] = result.serial_no

        return rate(update, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per stack (median)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each measurement")
    args = parser.parse_args()
    figures: dict[str, dict[str, list[float]]] = {"audited": {}, "not_audited": {}}
    with contextlib.ExitStack() as stacks:
        subjects = {}
        for label, extra in (("audited", ()), ("not_audited", ("--no-audit",))):
            root = Path(stacks.enter_context(tempfile.TemporaryDirectory(prefix="lwaudit-")))
            run, _ = stacks.enter_context(stack(root, *extra, wconfd_args=extra))
            subjects[label] = Subject(run)
        for round_ in range(args.rounds):
            # ABBA: neither stack is always measured first (or on a warmer machine).
            order = list(subjects.items())
            for label, subject in order if round_ % 2 == 0 else reversed(order):
                found = figures[label]
                found.setdefault("submit_job_per_s", []).append(subject.submit_rate(args.seconds))
                found.setdefault("submit_job_64_in_flight_per_s", []).append(
                    subject.pipelined_rate(args.seconds)
                )
                found.setdefault("update_object_per_s", []).append(
                    subject.update_rate(args.seconds)
                )
    medians = {
        label: {name: round(statistics.median(values), 1) for name, values in found.items()}
        for label, found in figures.items()
    }
    ratios = {
        name: round(medians["audited"][name] / medians["not_audited"][name], 3)
        for name in medians["audited"]
    }
    print(json.dumps({"bench": "audit", **medians, "ratio": ratios, "target_ratio": 0.9}))


if __name__ == "__main__":
    main()
