"""`python -m jobproc <job_id>` runs one job; `python -m jobproc --zygote` serves luxid
as a warm zygote that forks one such process per job (jobproc.zygote).

luxid starts both; the run directory (sockets) comes from `--run-dir` or `$LW_RUN_DIR`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from client import paths

log = logging.getLogger(__name__)


def setup_logging(job_id: int | None) -> None:
    """One line per event on stderr (luxid's, so the daemon's log or journal has them)."""
    who = f"job-{job_id}" if job_id is not None else "zygote"
    prefix = "" if os.environ.get("JOURNAL_STREAM") else "%(asctime)s "
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"{prefix}jobproc[%(process)d] {who} %(levelname)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("LW_LOG_LEVEL", "INFO"))


def run_job(job_id: int, run_dir: Path | None, exiting: bool = False) -> int:
    """Run one job in this process; the exit code.

    `exiting`: the caller ends the process right after (os._exit, the zygote's
    children), so the event loop's orderly teardown, a millisecond of a short job's
    CPU, is skipped; the job's own cleanup (locks, connections) has run by then.
    """
    from jobproc.runner import JobRunner

    setup_logging(job_id)
    main = JobRunner(job_id, run_dir).main()
    if not exiting:
        return asyncio.run(main)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop.run_until_complete(main)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run a job or the zygote."""
    parser = argparse.ArgumentParser(prog="python -m jobproc", description=__doc__)
    parser.add_argument("job_id", nargs="?", type=int, help="the job to run")
    parser.add_argument("--zygote", action="store_true", help="serve luxid as a zygote")
    parser.add_argument("--run-dir", type=Path, default=None, help="default: $LW_RUN_DIR")
    args = parser.parse_args(argv)
    run_dir = paths.run_dir(args.run_dir)
    if args.zygote:
        from jobproc.zygote import serve

        setup_logging(None)
        return serve(run_dir)
    if args.job_id is None or args.job_id <= 0:
        parser.error("a positive job id is required")
    return run_job(args.job_id, run_dir)
