"""`python -m jobproc <job_id>` runs one job (jobproc.runner); `python -m jobproc --zygote`
serves luxid as a warm zygote that forks one such process per job (jobproc.zygote).

luxid starts both; the run directory (sockets) comes from `--run-dir` or `$LW_RUN_DIR`.
This module is only the command line: the runner and the zygote do not import it.
"""

from __future__ import annotations

from pathlib import Path

from client import paths
from client.argparser import StrictParser
from jobproc.runner import run_job, setup_logging


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run a job or the zygote."""
    parser = StrictParser(prog="python -m jobproc", description=__doc__)
    parser.add_argument("job_id", nargs="?", type=int, help="the job to run")
    parser.add_argument("--zygote", action="store_true", help="serve luxid as a zygote")
    parser.add_argument("--run-dir", type=Path, default=None, help="default: $LW_RUN_DIR")
    args = parser.parse_args(argv)
    run_dir = paths.run_dir(args.run_dir)
    if args.zygote:
        from jobproc.zygote import serve  # its imports are for the zygote alone

        setup_logging(None)
        return serve(run_dir)
    if args.job_id is None or args.job_id <= 0:
        parser.error("a positive job id is required")
    return run_job(args.job_id, run_dir)
