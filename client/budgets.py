"""Disruption budgets (docs/contracts.md#disruption-budgets): the stored record and the
rules both daemons and the clients share.

A budget caps how many of its member instances may be disrupted at once.  wconfd stores
it as the `budget` kind of its configuration (`budgets[name]`, needing no lock, like the
filters); luxid writes it (`set_budget`) and enforces it on its one decision thread.
The record's wire shape is `{"name", "tags", "max_disrupted", "serial"}` plus the `uuid`
(= the name, so the map kinds share one index), `ctime` and `mtime` every config object
carries.
"""

from __future__ import annotations

from typing import Final

import msgspec

from client.errors import InvalidParams
from client.names import TAG_RULE, is_tag

# OP_IDs that disrupt the instance they name while their job runs.
DISRUPTIVE_OPS: Final = frozenset(
    {
        "OP_INSTANCE_MIGRATE",
        "OP_INSTANCE_FAILOVER",
        "OP_INSTANCE_SHUTDOWN",
        "OP_INSTANCE_REMOVE",
        "OP_INSTANCE_REPLACE_DISKS",
    }
)
MAX_BUDGET_TAGS: Final = 256


class BudgetRecord(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    kw_only=True,
    rename={"serial_no": "serial"},
):
    """One budget: `budgets[name]` in the configuration."""

    uuid: str = ""  # = name (wconfd fills it in)
    name: str
    tags: tuple[str, ...]
    max_disrupted: int
    serial_no: int = 0  # "serial" on the wire
    ctime: float = 0.0
    mtime: float = 0.0


def budget_problem(name: object, tags: object, max_disrupted: object) -> tuple[str, str] | None:
    """(param, what is wrong and what to send) for a bad budget, else None."""
    if not isinstance(name, str) or not is_tag(name):
        return "name", f"{name!r} is no budget name: use {TAG_RULE}"
    if not isinstance(tags, list | tuple) or not tags:
        return "tags", "give at least one instance tag (a budget covers the instances carrying one)"
    if len(tags) > MAX_BUDGET_TAGS:
        return "tags", f"at most {MAX_BUDGET_TAGS} tags"
    for tag in tags:
        if not isinstance(tag, str) or not is_tag(tag):
            return "tags", f"{tag!r} is no tag: use {TAG_RULE}"
    if len(set(tags)) != len(tags):
        return "tags", "a tag is given twice"
    if isinstance(max_disrupted, bool) or not isinstance(max_disrupted, int) or max_disrupted < 0:
        return "max_disrupted", f"must be an integer >= 0, got {max_disrupted!r}"
    return None


def check_budget(name: object, tags: object, max_disrupted: object) -> None:
    """InvalidParams naming the parameter of a bad budget (see `budget_problem`)."""
    problem = budget_problem(name, tags, max_disrupted)
    if problem is not None:
        param, why = problem
        raise InvalidParams(f"param `{param}`: {why}", {"param": param})
