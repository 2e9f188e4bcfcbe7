"""What a job presents to the filter evaluator: its id, its opcodes and their reason trails.

Build one `FilterJob` per job when it enters the queue (or is loaded at start) and keep it:
the constructor precomputes what every evaluation needs (the set of OP_IDs, the flattened
reason entries, the reason-rate-limit buckets), so a scheduling pass builds nothing per job.
Everything in it is fixed once the job is submitted (opcode inputs and reason trails never
change afterwards), which is also why verdicts may be cached per (chain, job id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from client.vocabulary import COMMON_OPCODE_PARAMS
from luxid.filters.ratelimit import bucket_of

# The common opcode params of docs/contracts.md#job-model.  Ganeti's opcode predicate sees
# OP_ID and the op's own params only (not the common params, as in Ganeti's Filtering.hs).
COMMON_PARAMS: Final[frozenset[str]] = frozenset(COMMON_OPCODE_PARAMS)

ReasonEntry = tuple[str, str, int]


def _entries(trail: Any) -> list[ReasonEntry]:
    """Well-formed `[source, text, timestamp]` entries of one trail (others are skipped)."""
    out: list[ReasonEntry] = []
    if not isinstance(trail, list | tuple):
        return out
    for entry in trail:
        if (
            isinstance(entry, list | tuple)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and isinstance(entry[1], str)
            and isinstance(entry[2], int | float)
            and not isinstance(entry[2], bool)
        ):
            out.append((entry[0], entry[1], entry[2]))  # type: ignore[arg-type]
    return out


class FilterJob:
    """A job as the filters see it (immutable after construction).

    - `id`: the job id.
    - `ops`: the opcode input dicts as submitted (`OP_ID`, own params, common params); the
      opcode predicate ignores the common params `priority depends reason comment`.
    - `reasons`: every reason entry `(source, text, timestamp_ns)` of every opcode, in order;
      by default read from each op's `reason` param.  Malformed entries are skipped.
    - derived: `op_ids`, `op_values` (the `(param, value)` pairs of string-valued own
      params), `reason_texts`, `reason_sources` (frozensets, for the chain's index) and
      `buckets` (the reason-rate-limit bucket keys `"<n>:<label>"`, ratelimit.py).
    """

    __slots__ = (
        "buckets",
        "id",
        "op_ids",
        "op_values",
        "ops",
        "reason_sources",
        "reason_texts",
        "reasons",
    )

    id: int
    ops: tuple[Mapping[str, Any], ...]
    reasons: tuple[ReasonEntry, ...]
    op_ids: frozenset[str]
    op_values: frozenset[tuple[str, str]]
    reason_texts: frozenset[str]
    reason_sources: frozenset[str]
    buckets: frozenset[str]

    def __init__(
        self,
        job_id: int,
        ops: Iterable[Mapping[str, Any]],
        reasons: Iterable[Sequence[Any]] | None = None,
    ) -> None:
        self.id = job_id
        self.ops = tuple(ops)
        if reasons is None:
            flat: list[ReasonEntry] = []
            for op in self.ops:
                flat.extend(_entries(op.get("reason")))
            self.reasons = tuple(flat)
        else:
            self.reasons = tuple(_entries(list(reasons)))
        self.op_ids = frozenset(
            op_id for op in self.ops if isinstance(op_id := op.get("OP_ID"), str)
        )
        self.op_values = frozenset(
            (k, v)
            for op in self.ops
            for k, v in op.items()
            if isinstance(v, str) and k != "OP_ID" and k not in COMMON_PARAMS
        )
        self.reason_texts = frozenset(e[1] for e in self.reasons)
        self.reason_sources = frozenset(e[0] for e in self.reasons)
        self.buckets = frozenset(
            b for b in (bucket_of(t) for t in self.reason_texts) if b is not None
        )

    def __repr__(self) -> str:
        return f"FilterJob(id={self.id}, op_ids={sorted(self.op_ids)}, reasons={len(self.reasons)})"
