"""luxid's per-job verdict memo (luxid.active_filters): a pass with the same rules looks
a job's verdict up, and any change of the rules, or the job leaving, makes it judged
again by the chain, so the memo never answers for rules that are gone."""

from __future__ import annotations

from client._server.metrics import Registry
from client.filterrules import FilterRule
from luxid.active_filters import ActiveFilters
from luxid.jobs import new_job

DELAY = {"OP_ID": "OP_TEST_DELAY", "duration": 0}


def rule(uuid: str, priority: int, action: str, op_id: str = "OP_TEST_DELAY") -> FilterRule:
    return FilterRule(
        uuid=uuid, priority=priority, watermark=0,
        predicates=[["opcode", ["=", "OP_ID", op_id]]], action=action,
    )  # fmt: skip


def action(filters: ActiveFilters, job) -> str | None:
    verdict = filters.verdict(job)
    return None if verdict is None else verdict.action


def test_the_verdict_follows_every_change_of_the_rules():
    filters = ActiveFilters(Registry("luxid"))
    job = new_job(1, [DELAY], 1.0)
    assert action(filters, job) is None
    filters.replace_all([rule("a" * 8, 10, "PAUSE")])
    assert action(filters, job) == "PAUSE" and action(filters, job) == "PAUSE"
    filters.put(rule("b" * 8, 5, "REJECT"))  # more urgent: applies first
    assert action(filters, job) == "REJECT"
    filters.remove("b" * 8)
    assert action(filters, job) == "PAUSE"
    filters.replace_all([rule("a" * 8, 10, "PAUSE", op_id="OP_NODE_ADD")])
    assert action(filters, job) is None
    filters.replace_all([])
    assert action(filters, job) is None


def test_a_job_that_left_is_judged_afresh():
    filters = ActiveFilters(Registry("luxid"))
    filters.replace_all([rule("a" * 8, 10, "PAUSE")])
    assert action(filters, new_job(7, [DELAY], 1.0)) == "PAUSE"
    filters.forget(7)
    # another job under the same id (a restored store): judged by its own opcodes
    assert action(filters, new_job(7, [{"OP_ID": "OP_NODE_ADD", "node_name": "n1"}], 1.0)) is None
