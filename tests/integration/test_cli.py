"""`lw` end to end (docs/contracts.md#lw-command-line): every subcommand's main path against real
daemons, run as a subprocess with --run-dir/--state-dir; `--json` parsed; exit codes 0/1/2/3.

The pure parts (table renderer, field choice, action syntax, users file) are tested in
process at the end.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

pytestmark = pytest.mark.timeout(120)

LW = str(Path(sys.executable).parent / "lw")


class Lw:
    """Runs `lw` as a subprocess on one pair of run/state dirs."""

    def __init__(self, run_dir: Path, state_dir: Path) -> None:
        self.run_dir = run_dir
        self.state_dir = state_dir

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [LW, "--run-dir", str(self.run_dir), "--state-dir", str(self.state_dir), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
            env=env,
        )

    def ok(self, *args: str, input: str | None = None) -> str:
        """Run, expect exit 0, return stdout."""
        done = self(*args, input=input)
        assert done.returncode == 0, f"lw {' '.join(args)} -> {done.returncode}\n{done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, code: int, *args: str, input: str | None = None) -> str:
        """Run, expect exit `code`, return stderr."""
        done = self(*args, input=input)
        assert done.returncode == code, (
            f"lw {' '.join(args)} -> {done.returncode}, wanted {code}\n{done.stdout}\n{done.stderr}"
        )
        assert "Traceback" not in done.stderr
        return done.stderr


def record(text: str) -> dict[str, str]:
    """An info view's `field: value` lines as a dict."""
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@pytest.fixture
def stack(daemon_factory: Any) -> Any:
    s = Stack(daemon_factory)
    yield s
    s.close()


@pytest.fixture
def lw(stack: Any) -> Lw:
    return Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)


@pytest.fixture
def lw_nodaemons(tmp_path: Path) -> Lw:
    return Lw(tmp_path / "run", tmp_path / "state")


# -- help, usage, unreachable ------------------------------------------------------------------


def _walk(parser: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    import argparse

    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _walk(sub, (*path, name))
    return found


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    from client.cli.main import build_parser, main

    commands = _walk(build_parser())
    assert len(commands) > 35
    for path, parser in commands:
        assert parser.description, f"lw {' '.join(path)} has no description"
        with pytest.raises(SystemExit) as exit_info:
            main([*path, "--help"])
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: lw {' '.join(path)}".rstrip())
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"lw {' '.join(path)} {action.option_strings[0]} has no help"
    done = subprocess.run([LW, "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "exit codes" in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["job"],
        ["bogus"],
        ["job", "info", "notanumber"],
        ["job", "priority", "1", "99"],
        ["job", "list", "--bogus"],
        ["job", "list", "-o", "id,nosuchfield"],
        ["filter", "add", "--action", "EXPLODE"],
        ["filter", "add", "--action", "RATE_LIMIT zero"],
        ["filter", "add", "--predicates", "[not json"],
        ["filter", "add", "--predicates", '{"a": 1}'],
        ["filter", "add", "--priority", "-1"],
        ["node", "modify", "n1"],
        ["node", "modify", "n1", "--offline", "maybe"],
        ["instance", "add", "i1", "--memory", "lots"],
        ["debug", "delay", "-1"],
        ["job", "submit", "/nonexistent/ops.json"],
        ["up", "--rapi-port", "70000"],
        ["rapi-user", "add", "bad name"],
    ],
)
def test_usage_errors_exit_2(lw_nodaemons: Lw, argv: list[str]) -> None:
    stderr = lw_nodaemons.fails(2, *argv)
    assert "error" in stderr


def test_unreachable_daemon_exit_3_names_socket_and_remedy(lw_nodaemons: Lw) -> None:
    stderr = lw_nodaemons.fails(3, "job", "list")
    assert str(lw_nodaemons.run_dir / "luxid.sock") in stderr
    assert "lw up" in stderr and "--run-dir" in stderr
    stderr = lw_nodaemons.fails(3, "node", "list")
    assert str(lw_nodaemons.run_dir / "wconfd.sock") in stderr
    lw_nodaemons.fails(3, "debug", "delay", "0")
    lw_nodaemons.fails(3, "lock", "list")


def test_info_with_luxid_down_shows_the_cluster_and_exits_3(daemon_factory: Any) -> None:
    wconfd = daemon_factory("wconfd").start()
    lw = Lw(wconfd.run_dir, wconfd.state_dir)
    done = lw("info")
    assert done.returncode == 3
    assert "lockwarden" in done.stdout
    assert "luxid.sock" in done.stderr


def test_global_dirs_before_or_after_the_subcommand_and_from_env(stack: Any) -> None:
    run = str(stack.wconfd.run_dir)
    for argv in (
        [LW, "--run-dir", run, "job", "list"],
        [LW, "job", "--run-dir", run, "list"],
        [LW, "job", "list", "--run-dir", run],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    env = {**os.environ, "LW_RUN_DIR": run}
    done = subprocess.run([LW, "job", "list"], capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    env["LW_RUN_DIR"] = "/nonexistent"
    done = subprocess.run(
        [LW, "job", "list", "--run-dir", run], capture_output=True, text=True, timeout=30, env=env
    )
    assert done.returncode == 0, "the flag must win over LW_RUN_DIR"


# -- cluster objects ---------------------------------------------------------------------------


def test_node_commands(lw: Lw) -> None:
    out = lw.ok("node", "add", "n1", "--primary-ip", "192.0.2.10")
    assert "Node 'n1' added" in out  # the job's log, streamed
    lw.ok("node", "add", "n2")
    nodes = lw.json("node", "list")
    assert [n["name"] for n in nodes] == ["n1", "n2"]
    assert nodes[0]["group"] == "default" and nodes[0]["primary_ip"] == "192.0.2.10"
    assert set(nodes[0]) == {
        "name", "group", "primary_ip", "offline", "drained", "master_candidate",
        "mtotal", "mfree", "ctotal", "pinst_cnt",
    }  # fmt: skip
    table = lw.ok("node", "list", "-o", "name,drained", "--no-headers", "--separator", "|")
    assert table.splitlines() == ["n1|N", "n2|N"]
    assert lw.ok("node", "list").splitlines()[0].split() == [
        "NAME", "GROUP", "PRIMARY_IP", "OFFLINE", "DRAINED", "MASTER_CANDIDATE",
        "MTOTAL", "MFREE", "CTOTAL", "PINST_CNT",
    ]  # fmt: skip
    info = lw.json("node", "info", "n1")
    assert info["name"] == "n1" and info["uuid"] and info["serial_no"] == 1
    assert lw.json("node", "list", "-o", "+uuid")[0]["uuid"] == info["uuid"]
    assert record(lw.ok("node", "info", "n1"))["primary_ip"] == "192.0.2.10"

    lw.ok("node", "modify", "n1", "--drained", "yes", "-O", "no")
    lw.ok("node", "modify", "n2", "-C", "yes")
    assert lw.json("node", "info", "n1", "-o", "drained,offline") == {
        "drained": True,
        "offline": False,
    }
    assert lw.json("node", "info", "n2")["master_candidate"] is True

    stderr = lw.fails(1, "node", "add", "n1")
    assert "already exists" in stderr
    lw.fails(1, "node", "info", "nosuch")
    lw.ok("node", "remove", "n2")
    assert [n["name"] for n in lw.json("node", "list")] == ["n1"]


def test_instance_commands(lw: Lw) -> None:
    lw.ok("node", "add", "n1")
    lw.ok("node", "add", "n2")
    lw.ok("instance", "add", "web1", "--memory", "1G", "--vcpus", "2", "--disk", "10G", "-n", "n1")
    (inst,) = lw.json("instance", "list")
    assert inst == {
        "name": "web1", "primary_node": "n1", "admin_state": "up", "memory": 1024, "vcpus": 2,
        "disk_sizes": [10240],
    }  # fmt: skip
    info = lw.json("instance", "info", "web1")
    assert info["nic_macs"][0].startswith("aa:00:00")
    lw.ok("instance", "migrate", "web1", "--target-node", "n2")
    assert lw.json("instance", "info", "web1", "-o", "primary_node") == {"primary_node": "n2"}
    assert lw.json("node", "info", "n2", "-o", "pinst_cnt,pinst_list") == {
        "pinst_cnt": 1,
        "pinst_list": ["web1"],
    }
    lw.fails(1, "node", "remove", "n2")  # still has an instance
    lw.ok("instance", "remove", "web1")
    assert lw.json("instance", "list") == []


def test_info(lw: Lw) -> None:
    lw.ok("node", "add", "n1")
    info = lw.json("info")
    assert info["name"] == "lockwarden" and info["nodes"] == 1 and info["nodegroups"] == 1
    assert info["drained"] is False and info["jobs"]["success"] == 1
    assert lw.json("info", "-o", "name,nodes") == {"name": "lockwarden", "nodes": 1}
    assert record(lw.ok("info"))["max_running_jobs"] == "20"


# -- jobs --------------------------------------------------------------------------------------


def test_submit_waits_streams_and_exit_codes(lw: Lw) -> None:
    done = lw("debug", "delay", "0", "--log-message", "hello there", "--reason", "testing")
    assert done.returncode == 0, done.stderr
    assert "hello there" in done.stdout
    job = lw.json("job", "info", "1")
    assert job["status"] == "success" and job["summary"] == ["TEST_DELAY(0.0)"]
    trail = job["ops"][0]["reason"]
    assert trail[0][:2] == ["lw:client:lw-debug", "testing"]

    stderr = lw.fails(1, "debug", "delay", "0", "--fail")
    assert "job 2 failed" in stderr and "Opcode failure was requested" in stderr

    job_id = int(lw.ok("debug", "delay", "0", "--submit", "--priority", "-5").strip())
    assert job_id == 3
    assert lw("job", "watch", str(job_id)).returncode == 0
    assert lw.json("job", "info", str(job_id), "-o", "oppriority") == {"oppriority": [-5]}
    lw.fails(1, "job", "watch", "2")  # watch reports the failure too
    lw.fails(1, "job", "info", "999")


def test_job_list_info_priority_cancel_archive(lw: Lw, stack: Any) -> None:
    # The second job is submitted once the first holds node x: submitted together, either
    # job's process could ask wconfd for the lock first.
    running = int(lw.ok("debug", "delay", "60", "--on-node", "x", "--submit").strip())
    stack.wait_op_running(running)
    waiting = int(lw.ok("debug", "delay", "60", "--on-node", "x", "--submit").strip())
    jobs = lw.json("job", "list")
    assert [j["id"] for j in jobs] == [running, waiting]
    assert set(jobs[0]) == {"id", "status", "priority", "summary"}
    rows = lw.ok("job", "list", "--no-headers", "--separator", ",", "-o", "id,status").splitlines()
    assert rows[0] == f"{running},running"

    lw.ok("job", "priority", str(waiting), "-3")
    assert lw.json("job", "info", str(waiting), "-o", "priority")["priority"] == -3
    info = lw.json("job", "info", str(running))
    assert set(info) >= {
        "id",
        "status",
        "ops",
        "oplog",
        "opresult",
        "received_ts",
        "pending_reason",
    }

    lw.fails(1, "job", "archive", str(running))  # not finished
    assert "cancel" in lw.ok("job", "cancel", str(running)).lower()
    assert stack.wait_final(running) == "canceled"
    lw.ok("job", "cancel", str(waiting), "--kill")
    stack.wait_final(waiting)
    lw.fails(1, "job", "cancel", str(running))  # finished already
    lw.ok("job", "archive", str(running))
    assert [j["id"] for j in lw.json("job", "list")] == [waiting]


def test_job_submit_file(lw: Lw, tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps([delay(0, log_messages=["one"]), delay(0, log_messages=["two"])]))
    done = lw("job", "submit", str(ops))
    assert done.returncode == 0 and done.stdout.count("\n") >= 2, done.stderr
    assert "one" in done.stdout and "two" in done.stdout
    one = json.dumps({"OP_ID": "OP_TEST_DELAY", "duration": 0})
    assert lw.ok("job", "submit", "-", "--submit", input=one).strip() == "2"
    ops.write_text(json.dumps([{"OP_ID": "OP_NO_SUCH_THING"}]))
    assert "InvalidOpcode" in lw.fails(1, "job", "submit", str(ops))
    ops.write_text('{"no": "op"}')
    lw.fails(2, "job", "submit", str(ops))


def test_watch_follows_live(lw: Lw, stack: Any) -> None:
    job_id = int(
        lw.ok("debug", "delay", "0.3", "--repeat", "3", "--log-message", "start", "--submit")
    )
    done = lw("job", "watch", str(job_id))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "start",
        "Test delay iteration 0/2",
        "Test delay iteration 1/2",
        "Test delay iteration 2/2",
    ]
    assert f"job {job_id}: success" in done.stderr


# -- filters, queue, locks ---------------------------------------------------------------------


def test_filter_commands(lw: Lw) -> None:
    uuid = lw.ok(
        "filter", "add", "--priority", "5", "--action", "REJECT", "--reason", "maintenance",
        "--predicates", '[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]',
    ).strip()  # fmt: skip
    assert len(uuid) == 36
    (rule,) = lw.json("filter", "list")
    assert rule["uuid"] == uuid and rule["action"] == "REJECT" and rule["priority"] == 5
    info = lw.json("filter", "info", uuid)
    assert info["reason_trail"][0][:2] == ["lw:client:lw-filter", "maintenance"]

    stderr = lw.fails(1, "debug", "delay", "0")
    assert "rejected by filter" in stderr and uuid in stderr

    assert lw.ok("filter", "replace", uuid, "--action", "RATE_LIMIT 2").strip() == uuid
    info = lw.json("filter", "info", uuid)
    assert info["action"] == ["RATE_LIMIT", 2] and info["priority"] == 5  # kept
    assert "RATE_LIMIT 2" in lw.ok("filter", "list")
    lw.ok("debug", "delay", "0")  # rate-limited, not rejected

    lw.ok("filter", "delete", uuid)
    assert lw.json("filter", "list") == []
    lw.fails(1, "filter", "delete", uuid)
    lw.fails(1, "filter", "info", uuid)
    assert "FilterError" in lw.fails(1, "filter", "add", "--predicates", '[["nosuch", 1]]')


def test_queue_commands(lw: Lw) -> None:
    info = lw.json("queue", "info")
    assert info["drained"] is False and info["max_running_jobs"] == 20 and info["running"] == 0
    lw.ok("queue", "drain")
    assert lw.json("queue", "info")["drained"] is True
    assert "QueueDrained" in lw.fails(1, "debug", "delay", "0")
    lw.ok("queue", "undrain")
    lw.ok("debug", "delay", "0")
    assert lw.json("queue", "info")["jobs"]["success"] == 1


def test_lock_list_shows_owners_and_waiters(lw: Lw, stack: Any) -> None:
    holder = int(lw.ok("debug", "delay", "60", "--on-node", "n9", "--submit"))
    stack.wait_op_running(holder)
    waiter = int(lw.ok("debug", "delay", "0", "--on-node", "n9", "--submit"))
    stack.until(lambda: stack.job_pending())
    locks = {row["name"]: row for row in lw.json("lock", "list")}
    assert locks["node/n9"]["mode"] == "exclusive"
    assert locks["node/n9"]["owners"][0].startswith(f"job-{holder}:")
    assert locks["node/n9"]["pending"][0].startswith(f"job-{waiter}:")
    assert next(iter(locks)) == "cluster/BGL"  # lock order
    table = lw.ok("lock", "list")
    assert table.splitlines()[0].split() == ["NAME", "MODE", "OWNERS", "PENDING"]
    lw.ok("job", "cancel", str(holder))
    assert stack.wait_final(waiter) == "success"


# -- rapi users --------------------------------------------------------------------------------


def test_rapi_user_commands(lw_nodaemons: Lw) -> None:
    lw = lw_nodaemons
    assert "added" in lw.ok(
        "rapi-user", "add", "alice", "--write", "--password-stdin", input="s3cret\n"
    )
    lw.ok("rapi-user", "add", "bob", "--password-stdin", input="hunter2\n")
    users = lw.json("rapi-user", "list")
    assert users == [{"name": "alice", "roles": ["write"]}, {"name": "bob", "roles": []}]
    path = lw.state_dir / "rapi_users"
    text = path.read_text()
    assert "s3cret" not in text and "hunter2" not in text and text.count("{SCRYPT}") == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "replaced" in lw.ok(
        "rapi-user", "add", "bob", "--write", "--password-stdin", input="x\n"
    )
    assert lw.json("rapi-user", "list")[1] == {"name": "bob", "roles": ["write"]}
    lw.ok("rapi-user", "remove", "alice")
    assert [u["name"] for u in lw.json("rapi-user", "list")] == ["bob"]
    lw.fails(1, "rapi-user", "remove", "alice")
    lw.fails(2, "rapi-user", "add", "carol", "--password-stdin", input="\n")
    lw.fails(2, "rapi-user", "add", "carol")  # no terminal to prompt on


# -- pure parts --------------------------------------------------------------------------------


def test_table_renderer() -> None:
    from client.cli.output import render_record, render_table

    rows = [[1, "running", ["A(1)", "B"], None], [12, "success", [], True]]
    fields = ["id", "status", "summary", "archived"]
    assert render_table(fields, rows) == [
        "ID STATUS  SUMMARY ARCHIVED",
        " 1 running A(1),B  -",
        "12 success         Y",
    ]
    assert render_table(fields, rows, headers=False, separator=";") == [
        "1;running;A(1),B;-",
        "12;success;;Y",
    ]
    assert render_table(["a"], []) == ["A"]
    assert render_record(["id", "oplog"], [3, [[1, 2.5, "message", "x"]]]) == [
        "id:    3",
        "oplog:",
        "  - 1,2.5,message,x",
    ]
    assert render_record(["a", "b"], [1, {"x": 1}], headers=False) == ["1", "x=1"]


def test_fields_choice() -> None:
    from client.cli.context import UsageError
    from client.cli.output import Fields

    f = Fields(known=("a", "b", "c"), default=("a",))
    assert f.choose(None) == ["a"]
    assert f.choose(None, record=True) == ["a", "b", "c"]
    assert f.choose("c,b") == ["c", "b"]
    assert f.choose("+c") == ["a", "c"]
    with pytest.raises(UsageError, match="known fields: a b c"):
        f.choose("a,z")


def test_action_syntax() -> None:
    from client.cli.context import UsageError
    from client.cli.filters import action_text, parse_action

    assert parse_action("reject") == "REJECT"
    assert parse_action("RATE_LIMIT 3") == ["RATE_LIMIT", 3]
    assert parse_action(" rate_limit   10 ") == ["RATE_LIMIT", 10]
    assert action_text(["RATE_LIMIT", 3]) == "RATE_LIMIT 3"
    for bad in ("", "RATE_LIMIT", "RATE_LIMIT 0", "RATE_LIMIT -2", "STOP", "ACCEPT 1"):
        with pytest.raises(UsageError):
            parse_action(bad)


def test_users_file_format() -> None:
    from client.rapi_users import hash_password, parse_users, verify_password

    password = "open sesame"  # a space never occurs in the salt or hash (base64)
    secret = hash_password(password)
    assert secret.startswith("{SCRYPT}16384$8$1$") and "sesame" not in secret
    assert secret != hash_password(password)  # salted
    assert verify_password(secret, password) and not verify_password(secret, "open Sesame")
    text = "\n".join(
        [
            "# comment",
            f"admin {secret} write",
            f"reader {secret}",
            "plain cleartextpassword",
            "greedy {SCRYPT}1073741824$8$1$c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5 write",
            f"odd {secret} superuser",
            f"ops {secret} jobs,Filters",
            f"ganeti {secret} read,write",
        ]
    )
    users, problems = parse_users(text)
    assert sorted(users) == ["admin", "ganeti", "ops", "reader"]
    assert users["admin"].roles == {"write"} and not users["reader"].roles
    assert users["ops"].roles == {"jobs", "filters"} and users["ganeti"].roles == {"write"}
    assert len(problems) == 3 and all("ignored" in p for p in problems)
    assert not verify_password("{SCRYPT}garbage", "pw")


def test_job_log_formatting_and_results() -> None:
    from client.cli.jobs import format_log_entry, result_text

    assert format_log_entry([1, 0.0, "message", "hi"]).endswith(" hi")
    assert format_log_entry([2, 0.0, "remote", {"a": 1}]).endswith(' [remote] {"a":1}')
    assert result_text("boom") == "boom"
    assert (
        result_text(["OpExecError", ["no such node", "unknown_entity"]])
        == "OpExecError: no such node"
    )


def test_handlers_return_exit_codes_in_process(lw: Lw) -> None:
    """`main()` in process: output goes to the context's streams; codes as documented."""
    from client.cli.main import main

    out = io.StringIO()
    sys_stdout = sys.stdout
    sys.stdout = out
    try:
        assert main(["--run-dir", str(lw.run_dir), "job", "list", "--json"]) == 0
    finally:
        sys.stdout = sys_stdout
    assert json.loads(out.getvalue()) == []


def test_ctrl_c_while_waiting_leaves_the_job_running(lw: Lw, stack: Any) -> None:
    import signal

    proc = subprocess.Popen(
        [LW, "--run-dir", str(lw.run_dir), "debug", "delay", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # written once lw follows the job (Ctrl-C is covered)
    assert first.strip() == "job 1 submitted", first
    stack.wait_op_running(1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "lw job watch 1" in stderr and "Traceback" not in stderr
    assert stack.status(1) == "running"
    lw.ok("job", "cancel", "1")


def test_waiting_command_says_why_the_job_is_held(lw: Lw, stack: Any) -> None:
    uuid = lw.ok("filter", "add", "--action", "PAUSE").strip()
    proc = subprocess.Popen(
        [LW, "--run-dir", str(lw.run_dir), "debug", "delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stack.until(lambda: stack.lc.query_jobs(ids=[1], fields=["id"])[0])
    stack.wait_for(1, lambda v: v[1] is not None, fields=("status", "pending_reason"))
    lw.ok("filter", "delete", uuid)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert f"job 1: queued (paused by filter {uuid})" in stderr
    assert "job 1: success" in stderr
