"""`lw node drain NODE --at TIME` and the start time in `lw node drain-status`
(docs/contracts.md#scheduled-drains), against a scripted luxid."""

from __future__ import annotations

import argparse
import io
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from test_drain_cli import T0, ScriptedLuxi, run, status

from client.cli.argtypes import start_time
from client.cli.context import EXIT_OK, UsageError
from client.cli.main import build_parser

LOCAL = datetime(2026, 12, 24, 2, 0).timestamp()  # 2026-12-24T02:00 in local time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-24T02:00", LOCAL),
        ("2026-12-24 02:00", LOCAL),
        ("2026-12-24T02:00:00", LOCAL),
        ("2026-12-24T02:00+01:00", datetime(2026, 12, 24, 1, 0, tzinfo=UTC).timestamp()),
        ("2026-12-24T01:00Z", datetime(2026, 12, 24, 1, 0, tzinfo=UTC).timestamp()),
        ("2026-12-24", datetime(2026, 12, 24).timestamp()),
    ],
)
def test_at_takes_iso_8601_local_unless_it_has_an_offset(text: str, expected: float) -> None:
    assert start_time(text) == expected


@pytest.mark.parametrize("text", ["tomorrow", "24.12.2026 02:00", "2026-13-01T00:00", ""])
def test_a_bad_time_is_a_usage_error_with_an_example(
    text: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"e\.g\. 2026-12-24T02:00"):
        start_time(text)
    with pytest.raises(SystemExit) as exc:
        build_parser(["node"]).parse_args(["node", "drain", "n1", "--at", text])
    assert exc.value.code == 2 and "not an ISO 8601 time" in capsys.readouterr().err


def scheduled(start: float) -> ScriptedLuxi:
    answer = msgspec.structs.replace(
        status(2), status="scheduled", start_at=start, started_at=start
    )
    return ScriptedLuxi([], answer=answer)


def test_at_schedules_and_returns_without_following() -> None:
    luxi = scheduled(LOCAL)
    out = io.StringIO()
    code, _ = run(
        ["node", "drain", "node1", "--at", "2026-12-24T02:00", "--deadline", "2h"], luxi, out
    )
    assert code == EXIT_OK
    assert luxi.called("drain_node") == [{"node": "node1", "deadline": 7200.0, "start_at": LOCAL}]
    assert luxi.called("wait_for_drain_change") == []  # not followed
    text = out.getvalue()
    assert text.startswith("drain of node1 scheduled for 2026-12-24 02:00: 2 instances to move")
    assert "--disable` cancels it" in text


def test_at_in_the_past_says_it_started_and_returns() -> None:
    luxi = ScriptedLuxi([])  # luxid answers a drain in progress
    out = io.StringIO()
    code, _ = run(["node", "drain", "node1", "--at", "2020-01-01T00:00"], luxi, out)
    assert code == EXIT_OK and luxi.called("wait_for_drain_change") == []
    assert out.getvalue().startswith("start time already past: draining node1 now: 0/2 moved")


def test_at_does_not_go_with_disable() -> None:
    with pytest.raises(UsageError, match="--disable takes only --keep-drained"):
        run(
            ["node", "drain", "node1", "--disable", "--at", "2026-12-24T02:00"],
            ScriptedLuxi([]),
            io.StringIO(),
        )


def test_drain_status_shows_scheduled_and_the_start_to_the_minute() -> None:
    luxi = ScriptedLuxi([])
    start = LOCAL + 59  # seconds are not shown
    row = msgspec.structs.replace(status(2), status="scheduled", start_at=start, started_at=start)
    luxi.query_drains = lambda: [row]  # type: ignore[method-assign]
    out = io.StringIO()
    run(["node", "drain-status", "--separator", "|"], luxi, out)
    header, line = out.getvalue().splitlines()
    assert header.startswith("TARGET|STATUS|START_AT|")
    assert line.startswith("node/node1|scheduled|2026-12-24 02:00|0/2 moved|")
    out = io.StringIO()
    run(["node", "drain-status", "node1", "--json", "-o", "status,start_at"], luxi, out)
    assert msgspec.json.decode(out.getvalue()) == {"status": "scheduled", "start_at": start}


def test_start_text_is_local_time() -> None:
    from client.cli.drains import start_text

    later = datetime.fromtimestamp(T0) + timedelta(minutes=1)
    assert start_text(later.timestamp()) == later.strftime("%Y-%m-%d %H:%M")
