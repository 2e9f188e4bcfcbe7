"""The budgets with their members (pure): which instances each budget covers and which of
them are down, built from the configuration luxid follows.

An instance belongs to every budget one of whose tags it carries; it is disrupted by
being down while its `admin_state` is not `up` (docs/contracts.md#disruption-budgets).
The book is rebuilt whenever the budgets or the instances change, so a scheduling pass
only counts the jobs on top of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from client.budgets import BudgetRecord


@dataclass(frozen=True)
class InstanceFacts:
    """What budgets need of an instance: its tags, and whether it is up."""

    name: str
    tags: tuple[str, ...]
    up: bool


@dataclass(frozen=True)
class BudgetBook:
    """The budgets by name, their `max_disrupted` (`limits`), their members (sorted), each
    instance's budgets (sorted) and each budget's down members."""

    budgets: Mapping[str, BudgetRecord] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    of_instance: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    down: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.budgets)


EMPTY_BOOK = BudgetBook()


def instance_facts(obj: Mapping[str, Any]) -> InstanceFacts:
    """The facts of an instance as `list_objects("instance")` gives it."""
    return InstanceFacts(
        name=str(obj["name"]),
        tags=tuple(obj.get("tags") or ()),
        up=obj.get("admin_state") == "up",
    )


def build_book(budgets: Iterable[BudgetRecord], instances: Iterable[InstanceFacts]) -> BudgetBook:
    """The book of `budgets` over `instances`."""
    by_name = {b.name: b for b in budgets}
    if not by_name:
        return EMPTY_BOOK
    of_tag: dict[str, list[str]] = {}
    for budget in by_name.values():
        for tag in budget.tags:
            of_tag.setdefault(tag, []).append(budget.name)
    members: dict[str, list[str]] = {name: [] for name in by_name}
    down: dict[str, set[str]] = {name: set() for name in by_name}
    of_instance: dict[str, tuple[str, ...]] = {}
    for inst in instances:
        names = sorted({name for tag in inst.tags for name in of_tag.get(tag, ())})
        if not names:
            continue
        of_instance[inst.name] = tuple(names)
        for name in names:
            members[name].append(inst.name)
            if not inst.up:
                down[name].add(inst.name)
    return BudgetBook(
        budgets=by_name,
        limits={name: b.max_disrupted for name, b in by_name.items()},
        members={name: tuple(sorted(m)) for name, m in members.items()},
        of_instance=of_instance,
        down={name: frozenset(d) for name, d in down.items()},
    )
