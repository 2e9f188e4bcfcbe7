"""luxid's growth rows (docs/contracts.md#performance-targets) at a small size: the code
paths of bench/growth_luxid.py (kill -9 and restart, submit rates, query_jobs of archived
and queued jobs, the drain) and bench/filters.py's scheduling pass, run on real daemons
with loose bounds, so the bench keeps working and nothing grows out of proportion."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # after the stdlib's queue
from filters import pass_figures
from growth_luxid import drain_growth, jobs_growth

pytestmark = pytest.mark.local_store("the bench scripts run their own daemons on local files")


@pytest.mark.timeout(300)
def test_jobs_growth_small(tmp_path):
    out = jobs_growth(tmp_path, total=3000, queued=1000, sync=200, samples=100)
    small, big = out["small"], out["big"]
    assert small["jobs"] == 1000 and big["jobs"] == 3000
    for figures in (small, big):
        assert figures["restart"]["kill_to_answer_s"] < 30  # 3 s at 1,000,000 on the bench
        assert figures["restart"]["rss_after_mb"] < 300
        assert figures["query_archived"]["p50_ms"] < 50
    assert big["query_queued"]["p50_ms"] < 50
    assert min(out["submit_ratio"].values()) > 0.2  # ≥ 0.9 on an idle bench machine


@pytest.mark.timeout(300)
def test_drain_growth_small():
    out = drain_growth(instances=100, small=30, max_parallel=10)
    for key in ("small", "big"):
        assert out[key]["max_concurrent_moves"] <= 10
        assert out[key]["complete_s"] < 120


def test_scheduling_pass_small(tmp_path):
    figures = asyncio.run(pass_figures(tmp_path, jobs=2000, rounds=1))
    assert figures["queued_jobs"] == 2000 and figures["filters"] == 1000
    assert max(figures["cold_pass_ms"], figures["warm_pass_ms"]) < 1000
