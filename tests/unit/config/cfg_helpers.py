"""Shared helpers of the config tests: a state with a few objects, and plan application."""

from __future__ import annotations

import itertools
from typing import Any

from wconfd.config import ConfigState, Plan


def apply(state: ConfigState, plan: Plan) -> Any:
    """What the daemon does after persisting: apply the record, return the result."""
    if plan.record is not None:
        state.apply(plan.record)
    return plan.result


def uuids(prefix: str = "u") -> Any:
    """A deterministic uuid factory."""
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):04d}"


def populated(now: float = 100.0) -> ConfigState:
    """Fresh config plus two nodes, a network, and an instance on both nodes."""
    state = ConfigState.fresh(now, uuids("fresh"))
    apply(state, state.add_object("node", {"name": "n1", "primary_ip": "192.0.2.1"}, now + 1))
    apply(state, state.add_object("node", {"name": "n2"}, now + 2))
    apply(
        state,
        state.add_object(
            "network", {"name": "net1", "network": "10.0.0.0/24", "gateway": "10.0.0.1"}, now + 3
        ),
    )
    apply(
        state,
        state.add_object(
            "instance",
            {
                "name": "i1",
                "primary_node": "n1",
                "secondary_nodes": ["n2"],
                "memory": 512,
                "vcpus": 2,
                "disks": [{"size": 1024}],
                "nics": [{"mac": "aa:00:00:00:00:01", "ip": "10.0.0.10", "network": "net1"}],
            },
            now + 4,
        ),
    )
    return state
