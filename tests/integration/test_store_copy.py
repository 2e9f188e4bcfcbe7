"""`lw backup` and `lw store copy` end to end, as docs/operations.md#backups and
#moving-to-three-machines tell an operator (shapes in
docs/contracts.md#backups-and-store-copy): a backup of serving daemons restored into a
new state directory, a copy of a state directory onto a real three-member etcd and back,
each time read back through freshly started daemons (configuration with its serial,
filters, budgets, drains, jobs with statuses and logs, the queue's drain flag, the next
job id continuing); and every refusal with its one line, DST left as it was."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import LuxiClient, WConfdClient
from client.backup import verify

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

pytestmark = pytest.mark.timeout(180)
LW = str(Path(sys.executable).parent / "lw")


def lw(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([LW, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, f"lw {' '.join(args)} -> {done.returncode}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def refused(*args: str) -> str:
    """The one line `lw` prints refusing, without its `lw: ` prefix."""
    lines = lw(*args, code=1).stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0].removeprefix("lw: ")


def populate(stack: Stack) -> None:
    """Something of every kind a copy carries."""
    stack.add_nodes("n1", "n2")
    with stack.admin() as wc:
        wc.add_object("instance", {"name": "web1", "primary_node": "n1", "tags": ["web"]})
    stack.lc.set_budget("web", ["web"], 1)
    stack.lc.replace_filter(None, 5, [], "ACCEPT", [["test", "kept", 1]])
    stack.lc.drain_node("n2", start_at=time.time() + 3600)
    ids = [stack.submit(delay(0, log_messages=["hello"])) for _ in range(3)]
    for job_id in ids:
        stack.wait_final(job_id)
    assert stack.lc.archive_job(ids[0])
    stack.lc.set_drain_flag(True)


def state_of(wconfd_socket: Path, luxid_socket: Path) -> dict[str, Any]:
    """What a copy must carry, as the daemons answer it."""
    with WConfdClient(wconfd_socket, name="test-reader") as wc, LuxiClient(luxid_socket) as lc:
        rows = lc.query_jobs(ids=None, fields=["id", "status", "oplog", "archived"])
        last = max(r[0] for r in rows)
        archived = lc.query_jobs(ids=list(range(1, last + 1)), fields=["id", "status", "oplog"])
        return {
            "config": wc.get_config(),
            "filters": lc.query_filters(),
            "budgets": [(b.name, b.tags, b.max_disrupted) for b in lc.query_budgets()],
            "drains": [(d.target, d.status, d.started_at) for d in lc.query_drains()],
            "jobs": [r[:3] for r in rows],
            "all_jobs": archived,
            "drained": lc.query_queue_info().drained,
            # The audit log, entries with their seqs; a failover at DST adds its own.
            "audit": [
                msgspec.to_builtins(e)
                for client in (wc, lc)
                for e in client.query_audit(limit=100_000)
                if e.method != "failover"
            ],
        }


def next_job_continues(luxid_socket: Path, after: int) -> None:
    with LuxiClient(luxid_socket) as lc:
        lc.set_drain_flag(False)
        assert lc.submit_job([delay(0)]) == after + 1


def stop(*daemons: Any) -> None:
    for d in daemons:
        assert d.stop() == 0


@pytest.mark.slow  # each lw store copy runs five short processes (the daemons' copy tools)
@pytest.mark.local_store("copies the local state directory itself")
def test_backup_of_serving_daemons_restores_into_a_new_state_dir(
    daemon_factory: Any, tmp_path: Path
) -> None:
    stack = Stack(daemon_factory)
    populate(stack)
    before = state_of(stack.wconfd.socket, stack.luxid.socket)
    assert {e["daemon"] for e in before["audit"]} == {"wconfd", "luxid"}
    backups = tmp_path / "backups"
    backups.mkdir()
    out = lw("--run-dir", str(stack.wconfd.run_dir), "backup", str(backups)).stdout.strip()
    path = Path(out)
    assert path.parent == backups
    assert re.fullmatch(r"lockwarden-backup-\d{8}T\d{6}Z", path.name)
    manifest = verify(path)
    assert set(manifest.files) == {
        "wconfd/wconfd.snapshot.json",
        "wconfd/audit.sqlite",
        "luxid/jobs.sqlite",
    }
    assert manifest.wconfd.serial == before["config"]["serial_no"]
    assert manifest.luxid.last_job_id == 3
    assert abs(manifest.created - time.time()) < 60
    raw = json.loads((path / "manifest.json").read_bytes())
    assert set(raw) == {"format", "created", "wconfd", "luxid", "files"} and raw["format"] == 1
    for daemon in (stack.wconfd, stack.luxid):  # what the daemons wrote is gone
        assert list((daemon.state_dir / "backups").iterdir()) == []
    stack.close()
    stop(stack.luxid, stack.wconfd)

    new = tmp_path / "new"
    lw("store", "copy", "--from", str(path), "--to", str(new / "state"))
    wconfd = daemon_factory("wconfd", root=new).start()
    luxid = daemon_factory("luxid", root=new).start()
    assert state_of(wconfd.socket, luxid.socket) == before
    next_job_continues(luxid.socket, 3)


def test_missing_backup_dir_is_refused(tmp_path: Path) -> None:
    line = refused("backup", str(tmp_path / "nowhere"))
    assert "nowhere: no such directory" in line


@pytest.mark.slow
@pytest.mark.local_store("refusals on local state directories")
def test_each_refusal_names_its_cause_and_changes_nothing(
    daemon_factory: Any, tmp_path: Path
) -> None:
    stack = Stack(daemon_factory)
    stack.add_nodes("n1")
    run = ("--run-dir", str(stack.wconfd.run_dir))
    backups = tmp_path / "b"
    backups.mkdir()
    backup = Path(lw(*run, "backup", str(backups)).stdout.strip())
    state = str(stack.wconfd.state_dir)

    assert refused("store", "copy", "--from", state, "--to", str(tmp_path / "x")) == (
        f"SRC is served by lw-wconfd (pid {stack.wconfd.pid}); take a backup "
        "(lw backup DIR) and copy that"
    )
    assert not (tmp_path / "x").exists()
    for force in ((), ("--force",)):
        assert refused("store", "copy", "--from", str(backup), "--to", state, *force) == (
            f"DST is served by lw-wconfd (pid {stack.wconfd.pid}); stop it first"
        )

    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("mine")
    assert refused("store", "copy", "--from", str(backup), "--to", str(full)) == (
        "DST is not empty (--force replaces it)"
    )
    assert [p.name for p in full.iterdir()] == ["keep"]

    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-a", str(backup), str(damaged)], check=True)
    db = damaged / "luxid" / "jobs.sqlite"
    data = bytearray(db.read_bytes())
    data[-1] ^= 0xFF
    db.write_bytes(bytes(data))
    assert refused(
        "store", "copy", "--from", str(damaged), "--to", str(tmp_path / "y"), "--force"
    ) == ("luxid/jobs.sqlite: sha256 differs from the manifest")
    manifest = json.loads((backup / "manifest.json").read_bytes())
    manifest["format"] = 99
    (damaged / "manifest.json").write_bytes(json.dumps(manifest).encode())
    assert refused("store", "copy", "--from", str(damaged), "--to", str(full), "--force") == (
        "manifest.json: unknown backup format 99 (this lw reads format 1)"
    )
    assert [p.name for p in full.iterdir()] == ["keep"] and not (tmp_path / "y").exists()

    # --force replaces DST whole: the stranger's file goes, the backup's state comes.
    lw("store", "copy", "--from", str(backup), "--to", str(full), "--force")
    assert sorted(p.name for p in full.iterdir()) == [
        "audit.sqlite", "jobs.sqlite", "luxid.lock", "wconfd.lock", "wconfd.snapshot.json"
    ]  # fmt: skip
    stack.close()


@pytest.mark.slow
@pytest.mark.local_store("copies a local state directory onto etcd and back")
def test_copy_local_to_etcd_and_back(
    daemon_factory: Any, tmp_path: Path, etcd_store_url: str
) -> None:
    stack = Stack(daemon_factory)
    populate(stack)
    before = state_of(stack.wconfd.socket, stack.luxid.socket)
    stack.close()
    stop(stack.luxid, stack.wconfd)

    src = str(stack.wconfd.state_dir)
    lw("store", "copy", "--from", src, "--to", etcd_store_url)
    assert refused("store", "copy", "--from", src, "--to", etcd_store_url) == (
        "DST is not empty (--force replaces it)"
    )
    on_etcd = ("--store", etcd_store_url, "--node", "node1")
    (tmp_path / "e").mkdir()
    wconfd = daemon_factory("wconfd", *on_etcd, root=tmp_path / "e").start()
    luxid = daemon_factory("luxid", *on_etcd, root=tmp_path / "e").start()
    Stack.until(lambda: luxid._serves_as_master(), timeout=20)
    after = state_of(wconfd.socket, luxid.socket)
    assert after == before
    # A second node joins as a standby, as the second machine does.
    (tmp_path / "e2").mkdir()
    standby = daemon_factory(
        "wconfd", "--store", etcd_store_url, "--node", "node2", root=tmp_path / "e2"
    ).start()
    with WConfdClient(wconfd.socket, name="test-reader") as wc:

        def roles() -> list[tuple[str, str]]:
            return [(r.node, r.role) for r in wc.list_roles()]

        Stack.until(lambda: len(roles()) == 2)  # its presence key, within a renewal
        assert roles() == [("node1", "master"), ("node2", "standby")]
    stop(standby)
    assert refused("store", "copy", "--from", src, "--to", etcd_store_url, "--force") == (
        "DST is served by lw-wconfd (node node1); stop it first"
    )
    assert refused("store", "copy", "--from", etcd_store_url, "--to", str(tmp_path / "z")) == (
        "SRC is served by lw-wconfd (node node1); take a backup (lw backup DIR) and copy that"
    )
    with LuxiClient(luxid.socket) as lc:  # a change at DST that --force must undo
        lc.set_drain_flag(False)
    stop(luxid, wconfd)
    lw("store", "copy", "--from", src, "--to", etcd_store_url, "--force")

    back = tmp_path / "back"
    lw("store", "copy", "--from", etcd_store_url, "--to", str(back / "state"))
    wconfd = daemon_factory("wconfd", root=back).start()
    luxid = daemon_factory("luxid", root=back).start()
    assert state_of(wconfd.socket, luxid.socket) == before
    next_job_continues(luxid.socket, 3)
    assert msgspec.json.decode(msgspec.json.encode(before["config"]))["serial_no"] > 1
