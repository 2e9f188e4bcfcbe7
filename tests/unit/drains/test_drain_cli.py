"""The drain commands of `lw` (docs/contracts.md#drains-for-operators) and their live follow
renderer, against a scripted luxid: a pseudo-terminal gets timestamped events and a progress bar, a
pipe gets plain lines, Ctrl-C stops following only, and the options reach the drain methods."""

from __future__ import annotations

import io
import os
import pty
from typing import Any

import pytest

from client import errors
from client.api.luxi import DrainChange, DrainStatus
from client.cli import drains
from client.cli.context import EXIT_INTERRUPTED, EXIT_OK, Context, Failed, UsageError
from client.cli.main import build_parser

T0 = 1_700_000_000.0


def status(remaining: int, total: int = 2, *, state: str = "draining", running: int = 0,
           shut_down: tuple[str, ...] = (), target: str = "node/node1") -> DrainStatus:  # fmt: skip
    return DrainStatus(
        target=target, status=state, started_at=T0, updated_at=T0, deadline=T0 + 3600,
        max_parallel=1, mode=None, message="", deadline_reached=bool(shut_down),
        completed_at=None, total=total, remaining=remaining, running=running,
        blocked=[], shut_down=list(shut_down), jobs=[1, 2, 3],
    )  # fmt: skip


def change(st: DrainStatus, *events: tuple[int, str]) -> DrainChange:
    return DrainChange(status=st, events=[[n, T0 + n, text] for n, text in events])


class ScriptedLuxi:
    """Answers wait_for_drain_change from a script (an exception in it is raised) and
    records every other call."""

    def __init__(self, script: list[Any], answer: DrainStatus | None = None) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answer = answer or status(2)

    def wait_for_drain_change(self, **kw: Any) -> Any:
        self.calls.append(("wait_for_drain_change", kw))
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def __getattr__(self, name: str) -> Any:
        def call(**kw: Any) -> Any:
            self.calls.append((name, kw))
            return None if name in ("undrain_queue", "set_drain_flag") else self.answer

        return call

    def called(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]


SCRIPT = [
    change(status(2), (1, "drain strategy set (deadline 12:00:00, max_parallel 1)")),
    "nochange",
    change(
        status(1, running=1),
        (2, "web1: migration job 2 submitted"),
        (3, "web1: migrated to node2"),
    ),
    change(status(0, state="complete"), (4, "all instances moved; drain complete")),
]


def run(argv: list[str], luxi: ScriptedLuxi, stdout: Any) -> tuple[int, Context]:
    args = build_parser(argv).parse_args(argv)
    ctx = Context("/nonexistent", "/nonexistent", stdout=stdout, stderr=io.StringIO())
    ctx._luxi = luxi  # type: ignore[assignment]
    handler = getattr(drains, args.handler.partition(":")[2])
    return handler(ctx, args), ctx


def read_all(master: int) -> str:
    """Everything written to the pseudo-terminal (its slave side is closed already)."""
    chunks = []
    try:
        while chunk := os.read(master, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the slave side is closed and everything was read
        pass
    finally:
        os.close(master)
    return b"".join(chunks).decode()


def test_follow_on_a_terminal_draws_a_progress_bar_under_timestamped_events():
    master, slave = pty.openpty()
    with os.fdopen(slave, "w", encoding="utf-8") as term:
        assert term.isatty()
        code, _ = run(["node", "drain", "node1"], ScriptedLuxi(SCRIPT), term)
    output = read_all(master)
    assert code == EXIT_OK
    assert "[" + "." * 30 + "] 0/2 moved" in output
    assert "[" + "#" * 15 + "." * 15 + "] 1/2 moved, 1 running" in output
    assert "[" + "#" * 30 + "] 2/2 moved" in output
    assert "\r\x1b[K" in output  # the bar is cleared before the next event line
    lines = output.replace("\r\x1b[K", "\n").splitlines()
    assert any(line.endswith(" web1: migrated to node2") and line[:4].isdigit() for line in lines)
    assert "drain of node/node1 complete: 2/2 moved" in output


def test_follow_not_on_a_terminal_writes_plain_lines():
    out = io.StringIO()
    code, ctx = run(["node", "drain", "node1"], ScriptedLuxi(SCRIPT), out)
    text = out.getvalue()
    assert code == EXIT_OK
    assert "\r" not in text and "\x1b" not in text and "[#" not in text
    lines = text.splitlines()
    assert [line.split(" ", 2)[2] for line in lines[:4]] == [
        "drain strategy set (deadline 12:00:00, max_parallel 1)",
        "web1: migration job 2 submitted",
        "web1: migrated to node2",
        "all instances moved; drain complete",
    ]
    assert "Ctrl-C stops following, not the drain" in ctx.stderr.getvalue()


def test_follow_asks_only_for_events_it_has_not_seen():
    luxi = ScriptedLuxi(SCRIPT)
    run(["node", "drain", "node1"], luxi, io.StringIO())
    assert [kw["since_event"] for kw in luxi.called("wait_for_drain_change")] == [0, 1, 1, 3]


def test_ctrl_c_stops_following_and_leaves_the_drain_alone():
    luxi = ScriptedLuxi([SCRIPT[0], KeyboardInterrupt()])
    code, ctx = run(["node", "drain", "node1"], luxi, io.StringIO())
    assert code == EXIT_INTERRUPTED
    assert luxi.called("cancel_node_drain") == []
    assert "lw node drain node1 --disable" in ctx.stderr.getvalue()


def test_a_drain_that_shut_instances_down_exits_1():
    end = change(status(1, state="complete", shut_down=("web3",)), (9, "deadline reached: "
                 "1 instances failed over, 1 shut down"))  # fmt: skip
    with pytest.raises(Failed, match="shut down: web3"):
        run(["node", "drain", "node1", "--force"], ScriptedLuxi([end]), io.StringIO())


@pytest.mark.parametrize(
    ("extra", "params"),
    [
        ([], {}),
        (["--deadline", "1h30m"], {"deadline": 5400.0}),
        (["--no-deadline"], {"deadline": None}),
        (["--force", "--max-parallel", "3", "--priority", "-5", "--message", "hw"],
         {"deadline": 0, "max_parallel": 3, "priority": -5, "message": "hw"}),
    ],
)  # fmt: skip
def test_options_reach_drain_node(extra, params):
    luxi = ScriptedLuxi([])
    code, _ = run(["node", "drain", "node1", "--detach", *extra], luxi, io.StringIO())
    assert code == EXIT_OK
    assert luxi.called("drain_node") == [{"node": "node1", **params}]


def test_bad_durations_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser(["node"]).parse_args(["node", "drain", "n1", "--deadline", "30m1h"])
    assert exc.value.code == 2
    assert "not a duration" in capsys.readouterr().err


@pytest.mark.parametrize("keep", [False, True])
def test_disable_cancels_the_drain(keep):
    luxi = ScriptedLuxi([], answer=status(1, state="canceled"))
    argv = ["node", "drain", "node1", "--disable", *(["--keep-drained"] if keep else [])]
    code, _ = run(argv, luxi, io.StringIO())
    assert code == EXIT_OK
    assert luxi.called("cancel_node_drain") == [{"node": "node1", "keep_drained": keep}]


def test_queue_drain_without_options_stays_the_drain_flag():
    luxi = ScriptedLuxi([])
    run(["queue", "drain"], luxi, io.StringIO())
    assert luxi.called("set_drain_flag") == [{"flag": True}] and not luxi.called("drain_queue")


@pytest.mark.parametrize("extra", [["--message", "x"], ["--wait"], ["--wait", "--message", "x"]])
def test_queue_drain_message_or_wait_without_soft_or_deadline_is_a_usage_error(extra):
    luxi = ScriptedLuxi([])
    with pytest.raises(UsageError, match="--soft or --deadline"):
        run(["queue", "drain", *extra], luxi, io.StringIO())
    assert luxi.calls == []  # neither the flag nor a queue drain


def test_queue_drain_soft_with_deadline_and_wait():
    end = change(status(0, 3, state="complete", target="queue"), (5, "all accepted jobs "
                 "finished; queue drain complete"))  # fmt: skip
    luxi = ScriptedLuxi([end], answer=status(3, 3, target="queue"))
    out = io.StringIO()
    code, _ = run(["queue", "drain", "--soft", "--deadline", "15m", "--wait"], luxi, out)
    assert code == EXIT_OK
    assert luxi.called("drain_queue") == [{"mode": "soft", "deadline": 900.0, "message": ""}]
    assert "new jobs are held; 0/3 finished" in out.getvalue()
    assert "drain of queue complete: 3/3 finished" in out.getvalue()


def test_queue_undrain_clears_the_flag_and_ends_the_queue_drain():
    luxi = ScriptedLuxi([])
    run(["queue", "undrain"], luxi, io.StringIO())
    assert luxi.called("undrain_queue") == [{}]
    assert luxi.called("set_drain_flag") == [{"flag": False}]


def test_queue_undrain_against_a_luxid_without_drains_clears_the_flag():
    class Older(ScriptedLuxi):
        def undrain_queue(self) -> None:
            raise errors.MethodNotFound("undrain_queue: not served")

    luxi = Older([])
    code, _ = run(["queue", "undrain"], luxi, io.StringIO())
    assert code == EXIT_OK and luxi.called("set_drain_flag") == [{"flag": False}]


def test_drain_status_table_and_one_node():
    luxi = ScriptedLuxi([])
    luxi.query_drains = lambda: [status(1, running=1), status(0, 3, state="complete",  # type: ignore[method-assign]
                                                             target="queue")]  # fmt: skip
    out = io.StringIO()
    run(["node", "drain-status", "--separator", "|"], luxi, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "TARGET|STATUS|START_AT|PROGRESS|RUNNING|BLOCKED|DEADLINE|MESSAGE"
    assert lines[1].startswith("node/node1|draining|-|1/2 moved, 1 running|1||")
    out = io.StringIO()
    run(["node", "drain-status", "node1", "-o", "target,remaining"], luxi, out)
    assert out.getvalue().splitlines() == ["target:    node/node1", "remaining: 1"]
    with pytest.raises(Failed, match="node9 has no drain"):
        run(["node", "drain-status", "node9"], luxi, io.StringIO())
