"""lw events: both daemons' events (docs/contracts.md#events), one a line.

Without --follow: the events of the last --since (default 10m) that the daemons still
keep, oldest first, then exit 0.  With --follow: those, then each new one as it happens
(each daemon followed with `follow_events`, which pushes each batch, on a thread of its own
with its own connection; followed again from where it was when the daemon restarts or
another node takes over), until Ctrl-C.  --json prints each event as one JSON object.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Final

import msgspec

from client import errors
from client.api.common import MAX_EVENTS, Event, EventBatch
from client.cli.context import EXIT_OK, Context
from client.follow import Following

DAEMONS: Final = ("luxid", "wconfd")
RETRY_SECONDS: Final = 1.0
_encoder = msgspec.json.Encoder()

Watch = Callable[..., EventBatch]
Follow = Callable[..., Following]


def event_line(event: Event) -> str:
    """`YYYY-mm-dd HH:MM:SS daemon topic action key {data}` in local time."""
    stamp = datetime.fromtimestamp(event.ts).strftime("%Y-%m-%d %H:%M:%S")
    data = _encoder.encode(event.data).decode()
    return f"{stamp} {event.daemon} {event.topic} {event.action} {event.key} {data}"


def gap_line(daemon: str, after: int) -> str:
    """What a follower says when a daemon no longer keeps what it asked for."""
    return f"{daemon}: events after index {after} are no longer kept; some are missing"


def read_since(watch: Watch, topics: list[str] | None, since: float) -> tuple[list[Event], int]:
    """Every kept event with `ts` >= `since`, and the daemon's `last` after them."""
    out: list[Event] = []
    after = 0
    while True:
        batch = watch(after=after, topics=topics, timeout=0, limit=MAX_EVENTS)
        out += [e for e in batch.events if e.ts >= since]
        after = batch.last
        if len(batch.events) < MAX_EVENTS:
            return out, after


def follow(start: Follow, daemon: str, after: int, topics: list[str] | None) -> Iterator[str]:
    """Lines of `daemon`'s events after `after`, as they come (forever); a line starting
    with NUL is a note for stderr."""
    while True:
        try:
            with start(after=after, topics=topics, limit=MAX_EVENTS) as following:
                for batch in following:
                    if batch.gap:
                        yield "\0" + gap_line(daemon, after)
                    for event in batch.events:
                        yield _encoder.encode(event).decode() + "\n" + event_line(event)
                    after = batch.last
        except (errors.ConnectionError, errors.NotMaster) as exc:
            # Restarted, or (on etcd) not the master for now: it may serve again.
            yield f"\0{daemon}: {exc.message}; following again in {RETRY_SECONDS:.0f} s"
            time.sleep(RETRY_SECONDS)


def events(ctx: Context, args: argparse.Namespace) -> int:
    """lw events [--topics T,...] [--since DURATION] [--follow] [--json]."""
    topics: list[str] | None = args.topics
    since = time.time() - args.since
    watches: dict[str, Watch] = {"luxid": ctx.luxi.watch_events, "wconfd": ctx.wconfd.watch_events}
    kept: list[Event] = []
    lasts: dict[str, int] = {}
    for daemon in DAEMONS:
        found, lasts[daemon] = read_since(watches[daemon], topics, since)
        kept += found
    kept.sort(key=lambda e: (e.ts, e.daemon, e.index))
    for event in kept:
        ctx.out(_encoder.encode(event).decode() if args.json else event_line(event))
    if not args.follow:
        return EXIT_OK
    lines: queue.Queue[str | BaseException] = queue.Queue()
    for daemon in DAEMONS:
        start = ctx.luxi.follow_events if daemon == "luxid" else ctx.wconfd.follow_events
        work = follow(start, daemon, lasts[daemon], topics)
        threading.Thread(target=_pump, args=(work, lines), daemon=True).start()
    while True:
        item = lines.get()
        if isinstance(item, BaseException):
            raise item
        if item.startswith("\0"):
            ctx.note(item[1:])
            continue
        as_json, _, as_text = item.partition("\n")
        ctx.out(as_json if args.json else as_text)


def _pump(work: Iterator[str], out: queue.Queue[Any]) -> None:
    """Hand a follower's lines (or what it raised) to the printing thread."""
    try:
        for line in work:
            out.put(line)
    except BaseException as exc:
        out.put(exc)
