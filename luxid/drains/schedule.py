"""Scheduled node drains (docs/contracts.md#scheduled-drains): a drain asked for now that
starts at a set time.

Until its `start_at` a drain's status is `scheduled`: nothing is marked or moved and the
node still takes new instances (it is no drain's excluded target).  Its timer in the
`DeadlineHeap` is its `start_at` (`timers.next_timer`), so the shell runs a pass at that
time — also after a restart, at once when it is already past — and `start_due`, the first
thing a pass does to a node drain, turns it into a drain in progress "as if called then".
The deadline was fixed when the drain was asked for: `deadline` seconds after the later of
`start_at` and the time of the call.

Pure functions of plain data; the clock is the `now` the shell passes.
"""

from __future__ import annotations

import math
from datetime import datetime

import msgspec

from client.drains import START_AT_MAX
from client.errors import InvalidParams
from luxid.drains.record import DrainRecord, with_events


def check_start_at(start_at: float | None) -> None:
    """InvalidParams unless `start_at` is null or a time (seconds since the epoch, up to
    START_AT_MAX)."""
    if start_at is None:
        return
    if not (math.isfinite(start_at) and 0 <= start_at <= START_AT_MAX):
        raise InvalidParams(
            "param `start_at`: must be an absolute time in seconds since the epoch "
            f"(e.g. {int(1.8e9)}), or null to start now; got {start_at!r}",
            {"param": "start_at"},
        )


def iso_time(when: float) -> str:
    """A start time in events: ISO 8601 in local time with its offset, to the second
    (`2026-12-24T02:00:00+01:00`)."""
    return datetime.fromtimestamp(when).astimezone().isoformat(timespec="seconds")


def begins(start_at: float | None, now: float) -> tuple[float, bool]:
    """When a drain asked for at `now` starts, and whether that is later (scheduled):
    `start_at` if it is still ahead, else now."""
    if start_at is not None and start_at > now:
        return start_at, True
    return now, False


def scheduled_event(start_at: float) -> str:
    """`drain scheduled to start at 2026-12-24T02:00:00+01:00`."""
    return f"drain scheduled to start at {iso_time(start_at)}"


def past_event(start_at: float) -> str:
    """`start time 2026-12-24T02:00:00+01:00 already past; starting now` (a start_at in
    the past when the drain was asked for)."""
    return f"start time {iso_time(start_at)} already past; starting now"


def start_due(record: DrainRecord, now: float) -> DrainRecord:
    """A scheduled drain whose start time came: draining from now on (`started_at` is the
    moment it started); any other record as it is."""
    if record.status != "scheduled" or record.start_at is None or now < record.start_at:
        return record
    started = msgspec.structs.replace(record, status="draining", started_at=now, updated_at=now)
    return with_events(started, now, f"scheduled start reached ({iso_time(record.start_at)})")


def cancel_scheduled(record: DrainRecord, now: float) -> DrainRecord:
    """Cancel a drain that has not started: `canceled`, no job, the node left untouched
    (it was never marked drained, so there is nothing to undo)."""
    canceled = msgspec.structs.replace(record, status="canceled", completed_at=now, undrain=False)
    return with_events(canceled, now, "drain canceled before its start; nothing was changed")
