"""Disruption budgets (docs/contracts.md#disruption-budgets) through the real daemons: the
methods compared with JSON literals, the exact pending_reason of a held job, the job
starting once a unit frees, `ignore_budgets`, a down member, why_job's budget Step, the
budgets kept across a restart of both daemons, `lw budget` and /2/budgets.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import errors

sys.path.insert(0, str(Path(__file__).parent))
from browser_testlib import Browser, chromium_path
from luxid_testlib import Stack, delay, raises
from test_cli import Lw
from test_drains_node import drain_jobs, follow, max_overlap
from test_rapi import ADMIN, Rapi, write_users

pytestmark = pytest.mark.timeout(120)
needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium on this machine (Debian: apt-get install chromium); "
    "the dashboard test needs a real browser",
)


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def add_instances(stack: Stack, *specs: tuple[str, list[str], str]) -> None:
    """Instances (name, tags, admin_state), each on its own node `<name>-a` (with a spare
    node `<name>-b` to move to), so that their moves share no lock."""
    stack.add_nodes(*(f"{name}-{side}" for name, _, _ in specs for side in "ab"))
    with stack.admin() as wc:
        for name, tags, state in specs:
            wc.add_object(
                "instance",
                {"name": name, "primary_node": f"{name}-a", "tags": tags, "admin_state": state},
            )


def migrate(name: str, duration: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": name, "target_node": f"{name}-b",
            "duration": duration, **extra}  # fmt: skip


def rows(stack: Stack) -> list[dict[str, Any]]:
    return msgspec.to_builtins(stack.lc.query_budgets())


@pytest.fixture
def web(stack: Stack) -> Stack:
    """web1..web3 up and tagged `web`, db1 up untagged; budget web of 1."""
    add_instances(
        stack, ("web1", ["web"], "up"), ("web2", ["web", "x"], "up"),
        ("web3", ["web"], "up"), ("db1", [], "up"),
    )  # fmt: skip
    row = msgspec.to_builtins(stack.lc.set_budget(name="web", tags=["web"], max_disrupted=1))
    assert row == {"name": "web", "tags": ["web"], "max_disrupted": 1,
                   "members": ["web1", "web2", "web3"], "disrupted": [], "events": []}  # fmt: skip
    return stack


def test_a_second_migration_waits_for_the_budget_with_the_exact_reason(web):
    stack = web
    first = stack.submit(migrate("web2", 60))
    stack.wait_op_running(first)
    second = stack.submit(migrate("web1"))
    reason = f"budget web: 1 of 1 disrupted (web2: job {first} OP_INSTANCE_MIGRATE)"
    assert stack.status(second) == "queued"
    assert stack.field(second, "pending_reason") == reason
    assert rows(stack)[0]["disrupted"] == [["web2", f"job {first} OP_INSTANCE_MIGRATE"]]
    chain = msgspec.to_builtins(stack.lc.why_job(job_id=second))["chain"]
    assert chain == [{"kind": "budget", "text": reason, "name": "web",
                      "disrupted": [["web2", f"job {first} OP_INSTANCE_MIGRATE"]]}]  # fmt: skip
    # An instance outside the budget is not held.
    other = stack.submit(migrate("db1"))
    assert stack.wait_final(other) == "success"
    # The first ends: the second starts.
    stack.lc.cancel_job(job_id=first)
    assert stack.wait_final(first) == "canceled"
    assert stack.wait_final(second) == "success"
    assert rows(stack)[0]["disrupted"] == []


def test_ignore_budgets_starts_and_is_recorded(web):
    stack = web
    first = stack.submit(migrate("web2", 60))
    stack.wait_op_running(first)
    forced = stack.submit(migrate("web1", ignore_budgets=True))
    assert stack.wait_final(forced) == "success"
    (row,) = rows(stack)
    assert [m for _, m in row["events"]] == [
        f"budget web exceeded by job {forced} (ignore_budgets)"
    ]


def test_a_down_member_counts_and_a_budget_of_zero_holds_everything(web):
    stack = web
    with stack.admin() as wc:
        inst = wc.get_object("instance", "web3")
        inst["admin_state"] = "down"
        wc.update_object("instance", inst)
    stack.until(lambda: rows(stack)[0]["disrupted"] == [["web3", "down"]])
    held = stack.submit(migrate("web1"))
    stack.until(lambda: stack.field(held, "pending_reason") is not None)
    assert stack.field(held, "pending_reason") == "budget web: 1 of 1 disrupted (web3: down)"
    stack.lc.set_budget(name="web", tags=["web"], max_disrupted=2)
    assert stack.wait_final(held) == "success"
    stack.lc.set_budget(name="web", tags=["web"], max_disrupted=0)
    with stack.admin() as wc:
        inst = wc.get_object("instance", "web3")
        inst["admin_state"] = "up"
        wc.update_object("instance", inst)
    stack.until(lambda: rows(stack)[0]["disrupted"] == [])
    zero = stack.submit(migrate("web2"))
    stack.until(lambda: stack.field(zero, "pending_reason") is not None)
    assert stack.field(zero, "pending_reason") == "budget web: 0 of 0 disrupted"


def test_set_replace_delete_errors_and_restart(web):
    stack = web
    budget = stack.wc.get_config()["budgets"]["web"]
    assert (budget["name"], budget["tags"], budget["max_disrupted"], budget["serial"]) == (
        "web",
        ["web"],
        1,
        1,
    )
    stack.lc.set_budget(name="web", tags=["web", "x"], max_disrupted=2)
    assert stack.wc.get_config()["budgets"]["web"]["serial"] == 2
    for params, param in (
        ({"name": "b", "tags": ["web"], "max_disrupted": -1}, "max_disrupted"),
        ({"name": "b", "tags": [], "max_disrupted": 1}, "tags"),
        ({"name": "b", "tags": ["no tag"], "max_disrupted": 1}, "tags"),
        ({"name": "b/c", "tags": ["web"], "max_disrupted": 1}, "name"),
    ):
        exc = raises(errors.InvalidParams, stack.lc.set_budget, **params)
        assert f"`{param}`" in exc.message
    raises(errors.NotFound, stack.lc.delete_budget, name="nope")
    stack.restart_wconfd()
    stack.restart_luxid()
    (row,) = rows(stack)
    assert (row["tags"], row["max_disrupted"]) == (["web", "x"], 2)
    assert row["members"] == ["web1", "web2", "web3"]
    stack.lc.delete_budget(name="web")
    assert rows(stack) == []
    events = stack.lc.watch_events(after=0, topics=["budget"], timeout=0).events
    assert [(e.key, e.action) for e in events] == [
        ("budget/web", "add"),
        ("budget/web", "update"),
        ("budget/web", "remove"),
    ]


def test_lw_budget_commands(web):
    stack = web
    lw = Lw(stack.luxid.run_dir, stack.luxid.state_dir)
    out = lw.ok("budget", "set", "db", "--tags", "db,x", "--max-disrupted", "0")
    assert out == "budget db: at most 0 of 1 member(s) disrupted at once\n"
    assert [r["name"] for r in lw.json("budget", "list")] == ["db", "web"]
    listing = lw.ok("budget", "list").splitlines()
    assert listing[0].split() == ["NAME", "TAGS", "MAX_DISRUPTED", "MEMBERS", "DISRUPTED"]
    assert listing[1].split() == ["db", "db,x", "0", "1", "-"]
    info = lw.ok("budget", "info", "web")
    assert "members:       web1, web2, web3\n" in info
    assert "budget" in lw.fails(2, "budget", "set", "x", "--tags", "web")  # no --max-disrupted
    assert "max_disrupted" in lw.fails(1, "budget", "set", "x", "--tags", "web",
                                       "--max-disrupted", "-1")  # fmt: skip
    assert "no budget named 'nope'" in lw.fails(1, "budget", "info", "nope")
    lw.ok("budget", "delete", "db")
    assert "no budget named 'db'" in lw.fails(1, "budget", "delete", "db")


def test_rapi_budgets(web, daemon_factory):
    stack = web
    write_users(stack.wconfd.state_dir, (*ADMIN, True))
    rapi = Rapi(daemon_factory)
    assert rapi.get("/2/budgets") == [{"id": "web", "uri": "/2/budgets/web"}]
    assert rapi.get("/2/budgets?bulk=1") == rows(stack)
    put = rapi.call("PUT", "/2/budgets/db", {"tags": ["x"], "max_disrupted": 2})
    assert put.status == 200
    assert put.body == {"name": "db", "tags": ["x"], "max_disrupted": 2, "members": ["web2"],
                          "disrupted": [], "events": []}  # fmt: skip
    assert rapi.get("/2/budgets/db") == put.body
    for body in ({"tags": [], "max_disrupted": 1}, {"tags": ["x"], "max_disrupted": -1},
                 {"tags": ["x"]}, {"tags": ["x"], "max_disrupted": 1, "other": 1}):  # fmt: skip
        assert rapi.call("PUT", "/2/budgets/db", body).status == 400, body
    unauthenticated = rapi.call(
        "PUT", "/2/budgets/db", {"tags": ["x"], "max_disrupted": 1}, user=None
    )
    assert unauthenticated.status == 401
    assert rapi.call("DELETE", "/2/budgets/db").status == 200
    assert rapi.call("DELETE", "/2/budgets/db").status == 404
    assert rapi.call("GET", "/2/budgets/db").status == 404


@needs_chromium
def test_dashboard_shows_each_budget_with_its_disrupted_members(web, daemon_factory, tmp_path):
    stack = web
    write_users(stack.wconfd.state_dir, (*ADMIN, True))
    rapi = Rapi(daemon_factory)
    token = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
    first = stack.submit(migrate("web2", 60))
    stack.wait_op_running(first)
    chip = 'document.querySelector(\'#budgets [data-budget="web"] [data-instance="{}"]\')'

    async def look() -> None:
        async with Browser(tmp_path / "chromium") as browser:
            await browser.open(f"{rapi.base}/ui/", {"Authorization": f"Basic {token}"})
            text = await browser.wait_for(chip.format("web2") + "?.innerText")
            assert text == f"web2 · job {first} OP_INSTANCE_MIGRATE"
            stack.lc.cancel_job(job_id=first)  # live: the chip goes without a reload
            await browser.wait_for("!" + chip.format("web2"))
            head = await browser.evaluate(
                "document.querySelector('#budgets [data-budget=\"web\"]').innerText"
            )
            assert "0 of 1 disrupted" in head

    asyncio.run(look())


def test_a_drain_plan_lists_the_budgets_that_pace_it(web):
    stack = web
    plan = msgspec.to_builtins(stack.lc.plan_node_drain(node="web1-a", max_parallel=4))
    assert plan["budgets"] == [["web", 1, 1]] and plan["waves"] == 1
    assert [m[0] for m in plan["moves"]] == ["web1"] and plan["blocked"] == []
    stack.lc.set_budget(name="web", tags=["web"], max_disrupted=0)
    plan = msgspec.to_builtins(stack.lc.plan_node_drain(node="web1-a"))
    assert plan["moves"] == []
    assert plan["blocked"] == [["web1", "budget web: 0 of 0 disrupted"]]


def test_two_drains_and_a_manual_migration_never_exceed_the_budget(stack):
    """A budget of 2 over web1..web5: a manual migration of web5 takes one unit, then n1
    (web1, web2) and n2 (web3, web4) drain at once while a job holds their only target.
    The drains submit one move between them (the last unit); the other instances are
    blocked with the budget's reason, and once the moves can run no more than 2 members
    are ever disrupted at once; both drains complete."""
    stack.add_nodes("n1", "n2", "t1", "m1", "m2")
    with stack.admin() as wc:
        for name, home in (("web1", "n1"), ("web2", "n1"), ("web3", "n2"), ("web4", "n2"),
                           ("web5", "m1")):  # fmt: skip
            wc.add_object(
                "instance",
                {"name": name, "primary_node": home, "tags": ["web"], "admin_state": "up"},
            )
    stack.lc.set_budget(name="web", tags=["web"], max_disrupted=2)
    # m2 too: the manual migration stays the only job that can use it.
    holder = stack.submit(delay(3.0, on_nodes=["t1", "m1", "m2"]))
    stack.wait_op_running(holder)
    manual = stack.submit({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web5",
                           "target_node": "m2"})  # fmt: skip
    stack.wait_status(manual, "waiting")  # started: web5 is disrupted
    for node in ("n1", "n2"):
        stack.lc.drain_node(node=node, deadline=None, max_parallel=2, message="budget test")

    def held(status: Any) -> list[list[Any]]:
        return [b for b in status.blocked if str(b[1]).startswith("budget web: 2 of 2 disrupted")]

    stack.until(lambda: sum(len(held(d)) for d in stack.lc.query_drains()) == 3, timeout=20)
    drains = {d.target: d for d in stack.lc.query_drains()}
    moves = [
        job
        for d in drains.values()
        for job in drain_jobs(stack, d)
        if job["op"]["OP_ID"] == "OP_INSTANCE_MIGRATE"
    ]
    assert len(moves) == 1, moves  # the last unit's move; nothing past the budget
    (move,) = moves
    moved = move["op"]["instance_name"]
    blocked = sorted(b for d in drains.values() for b in d.blocked)
    members = [
        f"{moved}: job {move['id']} OP_INSTANCE_MIGRATE",
        f"web5: job {manual} OP_INSTANCE_MIGRATE",
    ]
    reason = "budget web: 2 of 2 disrupted (" + ", ".join(sorted(members)) + ")"
    assert blocked == [[n, reason] for n in ("web1", "web2", "web3", "web4") if n != moved]
    for target in ("node/n1", "node/n2"):
        follow(stack, target, lambda s: s.status == "complete", timeout=60)
    assert stack.wait_final(manual) == "success"
    ended = [j for d in stack.lc.query_drains() for j in drain_jobs(stack, d)]
    (manual_row,) = stack.lc.query_jobs(ids=[manual], fields=["start_ts", "end_ts"])
    spans = [(j["start"], j["end"]) for j in ended if j["op"]["OP_ID"] == "OP_INSTANCE_MIGRATE"]
    assert len(spans) == 4 and all(j["status"] == "success" for j in ended)
    assert max_overlap([*spans, (manual_row[0], manual_row[1])]) <= 2
    events = [str(e[2]) for d in ("node/n1", "node/n2") for e in follow(
        stack, d, lambda s: True)[1]]  # fmt: skip
    assert any(": held by budget web: 2 of 2 disrupted" in text for text in events), events


def test_a_drains_deadline_failover_goes_past_the_budget_and_both_record_it(web):
    """web1's budget allows no disruption; a drain of its node with a deadline of 0 fails
    it over anyway, and the budget and the drain both get the event."""
    stack = web
    stack.lc.set_budget(name="web", tags=["web"], max_disrupted=0)
    stack.lc.drain_node(node="web1-a", deadline=0, max_parallel=1, message="now")
    done, _ = follow(stack, "node/web1-a", lambda s: s.status == "complete")
    (failover,) = [j for j in drain_jobs(stack, done) if j["op"]["OP_ID"] == "OP_INSTANCE_FAILOVER"]
    text = f"budget web exceeded by job {failover['id']} (deadline)"
    follow(stack, "node/web1-a", lambda s: True, until_event=text)
    assert [m for _, m in rows(stack)[0]["events"]] == [text]


def test_members_follow_instances_added_retagged_renamed_and_removed(web):
    """luxid reads only the instances wconfd's events name after a change; every kind of
    change reaches the budget's members."""
    stack = web

    def members() -> list[str]:
        return rows(stack)[0]["members"]

    with stack.admin() as wc:
        wc.add_object(
            "instance",
            {"name": "web4", "primary_node": "web1-a", "tags": ["web"], "admin_state": "up"},
        )
    stack.until(lambda: members() == ["web1", "web2", "web3", "web4"])
    with stack.admin() as wc:
        inst = wc.get_object("instance", "web2")
        wc.update_object("instance", {**inst, "tags": ["x"]})
        inst = wc.get_object("instance", "web3")
        wc.update_object("instance", {**inst, "name": "web9"})
    stack.until(lambda: members() == ["web1", "web4", "web9"])
    with stack.admin() as wc:
        wc.remove_object("instance", wc.get_object("instance", "web1")["uuid"])
    stack.until(lambda: members() == ["web4", "web9"])
