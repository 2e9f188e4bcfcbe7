"""One job process's life in timestamps, for finding where a job's time goes.

The job process marks each step it reaches (forked, loop, hello — its first directive
known —, locked, running, executed, released, finished, exit); at its end it logs them on one DEBUG
line

    timeline {"job": 42, "forked": 1732950000.1234, ..., "cpu_ms": 3.1, "minflt": 310}

as wall-clock seconds (comparable with luxid's job timestamps and across processes)
plus the CPU the process used and its minor page faults (in a child of the zygote,
mostly copy-on-write copies of the pages it touched).  `bench/job_life.py` runs jobs
with LW_LOG_LEVEL=DEBUG and turns these lines into the per-step breakdown.  A step of a
later opcode overwrites the earlier opcode's mark: the breakdown is of one-opcode jobs.
Marking costs a clock read, so it is always on; only the log line depends on the level.
"""

from __future__ import annotations

import json
import logging
import resource
import time

log = logging.getLogger(__name__)


class Timeline:
    """The marks of one job process."""

    def __init__(self, job_id: int, forked: float | None = None) -> None:
        self.job_id = job_id
        self.marks: dict[str, float] = {} if forked is None else {"forked": forked}

    def mark(self, step: str) -> None:
        """The job process reached `step` now."""
        self.marks[step] = time.time()

    def report(self) -> None:
        """Log the marks and the process's CPU time (DEBUG only)."""
        if not log.isEnabledFor(logging.DEBUG):
            return
        self.mark("exit")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu_ms = round((usage.ru_utime + usage.ru_stime) * 1000, 3)
        marks = {"job": self.job_id, **self.marks, "cpu_ms": cpu_ms, "minflt": usage.ru_minflt}
        log.debug("timeline %s", json.dumps(marks))
