"""Micro-benchmark of the filter evaluator: 1,000 rules x 10,000 queued jobs.

Run: `.venv/bin/python tests/unit/filters/bench_filter_eval.py` (prints one JSON object).
Not collected by pytest (the name does not start with test_).  Figures (medians of 5):
chain build, a cold pass (first pass after a filter change: memo empty), a warm pass,
a full selection pass (verdicts + Admission over all jobs), and the unindexed linear
evaluator for comparison, for a realistic mix and for an adversarial one (every rule a
numeric range test that no index can serve), plus 1,000 reason regexes.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from filters_testlib import verdict_linear, verdicts

from luxid.filters import Admission, FilterChain, FilterJob, FilterRule

OP_IDS = [
    "OP_TEST_DELAY",
    "OP_CLUSTER_RENAME",
    "OP_CLUSTER_SET_PARAMS",
    "OP_NODE_ADD",
    "OP_NODE_REMOVE",
    "OP_NODE_SET_PARAMS",
    "OP_INSTANCE_CREATE",
    "OP_INSTANCE_REMOVE",
    "OP_INSTANCE_MIGRATE",
    "OP_INSTANCE_REPLACE_DISKS",
    "OP_NODE_EVACUATE",
    "OP_CLUSTER_VERIFY",
]


def make_jobs(n: int, rnd: random.Random) -> list[FilterJob]:
    """Queued jobs: 1-3 opcodes each, a client reason plus luxid's per-opcode reason."""
    jobs = []
    for jid in range(1, n + 1):
        ops = []
        for idx in range(rnd.choice((1, 1, 1, 2, 3))):
            op_id = rnd.choice(OP_IDS)
            reason = [["lw:client:lw", f"lw {op_id.lower()} by ops", 1_700_000_000_000_000_000]]
            if rnd.random() < 0.05:
                reason.append(["lw:client:lw", f"rate-limit:{rnd.randint(1, 5)}:drain-n1", 1])
            if rnd.random() < 0.02:
                reason.append(["lw:client:lw", "maintenance pink bunny", 2])
            reason.append([f"lw:opcode:{op_id.lower()}", f"job={jid};index={idx}", 3])
            ops.append(
                {
                    "OP_ID": op_id,
                    "instance_name": f"inst{rnd.randint(1, 500)}",
                    "node_name": f"node{rnd.randint(1, 50)}",
                    "duration": 0.0,
                    "priority": 0,
                    "reason": reason,
                }
            )
        jobs.append(FilterJob(jid, ops))
    return jobs


def realistic_rules(rnd: random.Random, watermark: int) -> list[FilterRule]:
    """A mix in which most rules match nothing, as in a cluster with many dormant rules."""
    rules: list[FilterRule] = []

    def add(prio: int, preds: list[Any], action: Any) -> None:
        rules.append(
            FilterRule(
                uuid=str(uuidlib.UUID(int=rnd.getrandbits(128))),
                priority=prio,
                watermark=watermark,
                predicates=preds,
                action=action,
            )
        )

    actions = ["REJECT", "PAUSE", ["RATE_LIMIT", 3], "ACCEPT", "CONTINUE"]
    for i in range(500):  # plugin opcodes that no queued job uses
        add(
            rnd.randint(0, 99), [["opcode", ["==", "OP_ID", f"OP_PLUGIN_{i}"]]], rnd.choice(actions)
        )
    for i in range(150):  # a specific instance's operations
        add(
            rnd.randint(0, 99),
            [
                [
                    "opcode",
                    ["&", ["=", "OP_ID", "OP_INSTANCE_MIGRATE"], ["==", "instance_name", f"x{i}"]],
                ]
            ],
            rnd.choice(actions),
        )
    for i in range(100):  # maintenance exceptions by exact reason
        add(rnd.randint(0, 99), [["reason", ["==", "reason", f"maintenance ticket {i}"]]], "ACCEPT")
    for i in range(50):  # by reason source
        add(rnd.randint(0, 99), [["reason", ["==", "source", f"tool-{i}"]]], "PAUSE")
    for _ in range(100):  # job-id windows (old drains, single jobs)
        lo = rnd.randint(20_000, 90_000)
        add(
            rnd.randint(0, 99), [["jobid", ["&", [">=", "id", lo], ["<", "id", lo + 50]]]], "REJECT"
        )
    for i in range(50):  # reason regexes (tested on every job)
        add(rnd.randint(0, 99), [["reason", ["=~", "reason", f"^ticket-{i}\\b"]]], "ACCEPT")
    for _ in range(40):  # documentation rules
        add(rnd.randint(0, 99), [], "CONTINUE")
    # the rules that do something: a throttle, a soft drain below all of them
    add(50, [["opcode", ["==", "OP_ID", "OP_INSTANCE_REPLACE_DISKS"]]], ["RATE_LIMIT", 10])
    add(60, [["opcode", ["=~", "OP_ID", "^OP_NODE_"]]], ["RATE_LIMIT", 2])
    for i in range(8):
        add(100 + i, [["jobid", [">", "id", "watermark"]]], "PAUSE")
    return rules


def regex_rules(rnd: random.Random) -> list[FilterRule]:
    """1,000 reason regexes matching nothing (served by the combined-regex prefilter)."""
    return [
        FilterRule(
            uuid=str(uuidlib.UUID(int=rnd.getrandbits(128))),
            priority=i,
            watermark=0,
            predicates=[["reason", ["=~", "reason", f"ticket-{i}\\b"]]],
            action="PAUSE",
        )
        for i in range(1000)
    ]


def adversarial_rules(rnd: random.Random) -> list[FilterRule]:
    """1,000 numeric range tests on an opcode param, matching nothing: no index applies,
    so every rule is tested on every job (the worst case of the evaluator)."""
    return [
        FilterRule(
            uuid=str(uuidlib.UUID(int=rnd.getrandbits(128))),
            priority=i,
            watermark=0,
            predicates=[["opcode", [">", "duration", 1_000_000 + i]]],
            action="PAUSE",
        )
        for i in range(1000)
    ]


def selection_pass(chain: FilterChain, jobs: list[FilterJob], max_running: int = 20) -> int:
    """What a scheduler pass does with the filters: every queued job's verdict, slots."""
    adm = Admission()
    started = 0
    for job in jobs:
        v = chain.verdict(job)
        if v is not None and v.action == "REJECT":
            continue
        if adm.hold_reason(v, job.buckets) is None and started < max_running:
            adm.occupy(v, job.buckets)
            started += 1
    return started


def median_ms(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def measure(rules: list[FilterRule], jobs: list[FilterJob], linear: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"rules": len(rules), "jobs": len(jobs)}
    out["build_ms"] = median_ms(lambda: FilterChain(rules))
    base = FilterChain(rules)  # the previous chain: a filter change recompiles only new rules
    out["rebuild_unchanged_ms"] = median_ms(lambda: FilterChain(rules, previous=base))
    out["cold_pass_ms"] = median_ms(lambda: verdicts(FilterChain(rules, previous=base), jobs))
    chain = FilterChain(rules)
    verdicts(chain, jobs)
    out["warm_pass_ms"] = median_ms(lambda: verdicts(chain, jobs))
    out["cold_selection_pass_ms"] = median_ms(
        lambda: selection_pass(FilterChain(rules, previous=base), jobs)
    )
    if linear:
        out["linear_pass_ms"] = median_ms(lambda: [verdict_linear(chain, j) for j in jobs], 1)
    vs = verdicts(chain, jobs)
    out["applying"] = {
        a: sum(1 for v in vs if (v.action if v else None) == a)
        for a in ("ACCEPT", "PAUSE", "REJECT", "RATE_LIMIT", None)
    }
    return out


if __name__ == "__main__":
    rnd = random.Random(42)
    jobs = make_jobs(10_000, rnd)
    result = {}
    for name, rules, linear in (
        ("realistic", realistic_rules(rnd, watermark=9_000), True),
        ("regex_heavy", regex_rules(rnd), False),
        ("adversarial", adversarial_rules(rnd), False),
    ):
        result[name] = measure(rules, jobs, linear)
    print(json.dumps(result, indent=1))
