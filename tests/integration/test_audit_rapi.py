"""The audit log from the RAPI and from `lw` (docs/contracts.md#audit-log), through the
real daemons: each RAPI request's changes name `rapi:<user>` (or `.../token:<id>`), and
`lw`'s name `cli:<login>`; `GET /2/audit` needs role audit and merges both daemons with
lw-rapi's own file, where `lw rapi-user` and `POST /2/tokens` record user and token
changes; `lw audit` prints the same merge, and its filters work."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_cli import Lw
from test_rapi import ADMIN, READER, Rapi, assert_error
from test_rapi import rapi as rapi  # the fixture: lw-rapi on the stack
from test_rapi import stack as stack  # the fixture: wconfd + luxid, ADMIN may write and audit

from client.identity import cli_actor

pytestmark = pytest.mark.timeout(120)

BOSS = ("boss", "boss-pw")
FILTER = {"priority": 5, "predicates": [], "action": "CONTINUE", "reason": []}


def _lw(stack: Any) -> Lw:
    return Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)


def _bearer(token: str) -> dict[str, Any]:
    return {"user": None, "headers": {"Authorization": f"Bearer {token}"}}


def _one(entries: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    found = [e for e in entries if all(e.get(k) == v for k, v in fields.items())]
    assert len(found) == 1, (fields, entries)
    return found[0]


def test_rapi_audit_names_the_user_and_token_and_needs_role_audit(rapi: Rapi, stack: Any) -> None:
    cli = _lw(stack)
    cli.ok(
        "rapi-user", "add", BOSS[0], "--roles", "admin", "--password-stdin", input=f"{BOSS[1]}\n"
    )
    uuid = rapi.call("POST", "/2/filters", FILTER).body
    made = rapi.call("POST", "/2/tokens", {"user": ADMIN[0]}, user=BOSS).body
    token_uuid = rapi.call("POST", "/2/filters", FILTER, **_bearer(made["token"])).body

    entries = rapi.get("/2/audit")
    assert [e["ts"] for e in entries] == sorted(e["ts"] for e in entries)  # merged by time
    added = _one(entries, method="replace_filter", target=f"filter/{uuid}")
    assert (added["daemon"], added["actor"], added["outcome"]) == ("luxid", "rapi:admin", "ok")
    assert added["uid"] == os.getuid()  # lw-rapi's peer uid, from SO_PEERCRED
    by_token = _one(entries, method="replace_filter", target=f"filter/{token_uuid}")
    assert by_token["actor"] == f"rapi:admin/token:{made['id']}"
    token = _one(entries, method="token_create", target=f"token/{made['id']}")
    assert (token["daemon"], token["actor"]) == ("rapi", "rapi:boss")
    assert token["pid"] == rapi.daemon.proc.pid
    user = _one(entries, method="rapi_user_add", target="rapi-user/boss")
    assert (user["daemon"], user["actor"], user["uid"]) == ("rapi", cli_actor(), os.getuid())

    only = rapi.get("/2/audit?actor=rapi:boss&limit=5")
    assert [(e["method"], e["actor"]) for e in only] == [("token_create", "rapi:boss")]
    # luxid's write to wconfd on the user's behalf names the same actor (both daemons).
    same = rapi.get(f"/2/audit?target=filter/{uuid}")
    assert {(e["daemon"], e["method"], e["actor"]) for e in same} == {
        ("luxid", "replace_filter", "rapi:admin"),
        ("wconfd", "add_object", "rapi:admin"),
    }
    assert rapi.get(f"/2/audit?since={added['ts']}&until={token['ts']}")[0] == added
    assert rapi.get("/2/audit?limit=1") == [entries[-1]]
    assert rapi.get(f"/2/audit?since={time.time() + 60}") == []

    assert_error(rapi.call("GET", "/2/audit", user=READER), 403, "needs role audit")
    assert rapi.call("GET", "/2/audit", user=READER).body["explain"] == "needs role audit"
    assert_error(rapi.call("GET", "/2/audit?since=yesterday"), 400, "'since'")
    assert_error(rapi.call("GET", "/2/audit?limit=-1"), 400, "'limit'")
    assert "Traceback" not in rapi.daemon.log()


def test_lw_audit_merges_both_daemons_and_the_rapi_file(stack: Any) -> None:
    cli = _lw(stack)
    me = cli_actor()
    cli.ok("rapi-user", "add", "carol", "--password-stdin", input="c-pw\n")
    cli.ok("node", "add", "n1")  # luxid: submit_job by lw; wconfd: add_object by the job
    made = cli.ok("rapi-user", "token", "carol").splitlines()[1].removeprefix("id: ")
    cli.ok("rapi-user", "revoke", made)
    cli.ok("rapi-user", "remove", "carol")

    entries = cli.json("audit")
    assert [e["ts"] for e in entries] == sorted(e["ts"] for e in entries)
    assert {e["daemon"] for e in entries} == {"wconfd", "luxid", "rapi"}
    submitted = _one(entries, daemon="luxid", method="submit_job")
    assert (submitted["actor"], submitted["uid"]) == (me, os.getuid())
    job = int(submitted["target"].removeprefix("job/"))
    node = _one(entries, daemon="wconfd", method="add_object", target="node/n1")
    assert (node["actor"], node["job_id"], node["outcome"]) == (f"job:{job}", job, "ok")
    rapi_changes = [
        (e["method"], e["target"], e["actor"]) for e in entries if e["daemon"] == "rapi"
    ]
    assert rapi_changes == [
        ("rapi_user_add", "rapi-user/carol", me),
        ("token_create", f"token/{made}", me),
        ("token_revoke", f"token/{made}", me),
        ("rapi_user_remove", "rapi-user/carol", me),
    ]
    assert all(e["pid"] != os.getpid() for e in entries)  # lw's own pid, not the test's

    assert {e["actor"] for e in cli.json("audit", "--actor", me)} == {me}
    assert cli.json("audit", "--target", "node/n1") == [node]
    assert cli.json("audit", "--since", "1h") == entries
    assert cli.json("audit", "--since", "0s") == []
    assert cli.json("audit", "--until", "1h") == []
    assert cli.json("audit", "--limit", "2") == entries[-2:]
    table = cli.ok("audit").splitlines()
    assert table[0].split() == ["TIME", "DAEMON", "ACTOR", "UID", "METHOD", "TARGET", "OUTCOME"]
    assert len(table) == len(entries) + 1
    assert "rapi_user_remove" in table[-1] and "rapi-user/carol" in table[-1]
    assert "--since" in cli.fails(2, "audit", "--since", "last tuesday")

    garbled = stack.wconfd.state_dir.parent / "other-rapi"
    garbled.mkdir()
    (garbled / "rapi_audit.sqlite").write_bytes(b"not a database " * 100)
    done = cli("audit", "--json", "--rapi-state-dir", str(garbled))
    assert done.returncode == 0, done.stderr
    assert (
        "not readable" in done.stderr and "RAPI user and token changes are left out" in done.stderr
    )
    assert json.loads(done.stdout) == [e for e in entries if e["daemon"] != "rapi"]


def test_lw_rapi_user_fails_when_its_audit_entry_cannot_be_written(tmp_path: Path) -> None:
    cli = Lw(tmp_path / "run", tmp_path / "state")
    (tmp_path / "state" / "rapi_audit.sqlite").mkdir(parents=True)  # no file can be there
    err = cli.fails(1, "rapi-user", "add", "dave", "--password-stdin", input="d-pw\n")
    assert "rapi-user/dave: changed, but its audit entry could not be written" in err
