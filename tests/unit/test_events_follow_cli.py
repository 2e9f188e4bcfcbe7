"""`lw events --follow`'s follower (client.cli.events.follow): a daemon that restarts, or
that is not the master for a while (etcd), is followed again from where the follower was;
nothing is printed twice and nothing is lost."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from client import errors
from client.api.common import Event, EventBatch
from client.cli import events as cli_events


def event(index: int) -> Event:
    return Event(index, 1.0, "luxid", "queue", "drain_flag", "queue", {"drained": True})


@pytest.mark.parametrize(
    "failure",
    [errors.ConnectionError("closed"), errors.NotMaster("node2 is the master", {})],
)
def test_the_follower_follows_again_from_where_it_was(failure, monkeypatch):
    monkeypatch.setattr(cli_events, "RETRY_SECONDS", 0.0)
    calls: list[int] = []
    script: list[Any] = [[EventBatch([event(1), event(2)], 2, False)], failure,
                         [EventBatch([event(3)], 3, False)]]  # fmt: skip

    @contextlib.contextmanager
    def start(after: int, **_: Any) -> Iterator[list[EventBatch]]:
        calls.append(after)
        step = script.pop(0)
        if isinstance(step, Exception):
            raise step
        yield step

    lines = cli_events.follow(start, "luxid", 0, None)  # type: ignore[arg-type]
    printed = [next(lines) for _ in range(4)]
    assert calls == [0, 2, 2]
    indexes = [line for line in printed if not line.startswith("\0")]
    assert [line.split('"index":')[1].split(",")[0] for line in indexes] == ["1", "2", "3"]
    assert "following again" in next(line for line in printed if line.startswith("\0"))
