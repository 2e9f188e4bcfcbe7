"""A guard against evaluator slowdowns: one selection pass over 10,000 queued jobs with
1,000 rules (the realistic mix of bench_filter_eval.py).  The performance targets want the whole
scheduling pass within 200 ms; the filter part measures ~35 ms on a 2-core machine, so
the bound here (1 s) only catches an order-of-magnitude regression on a busy CI host."""

from __future__ import annotations

import random
import time

from bench_filter_eval import adversarial_rules, make_jobs, realistic_rules, selection_pass

from luxid.filters import FilterChain


def best_of(n: int, fn: object) -> float:
    assert callable(fn)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def test_selection_pass_with_1000_rules_and_10000_jobs() -> None:
    rnd = random.Random(7)
    jobs = make_jobs(10_000, rnd)
    for rules in (realistic_rules(rnd, watermark=9_000), adversarial_rules(rnd)):
        base = FilterChain(rules)
        # a filter change: new chain from the previous one, memos empty
        cold = best_of(
            3,
            lambda rules=rules, base=base: selection_pass(FilterChain(rules, previous=base), jobs),
        )
        assert cold < 1.0, f"cold selection pass took {cold * 1000:.0f} ms"
