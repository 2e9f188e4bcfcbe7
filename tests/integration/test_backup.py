"""`backup(dir)` on both sockets and `lw backup DIR` (docs/contracts.md#backups-and-store-copy):
the daemons write only below `<state dir>/backups/`, each part consistent on its own (wconfd
at one serial, luxid at one transaction) while a writer changes the configuration and
submits jobs; the manifest's hashes verify."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from client import LuxiClient, errors
from client._server.audit_sql import read_file
from client.backup import sha256_file

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def stack(daemon_factory: Any) -> Any:
    s = Stack(daemon_factory)
    yield s
    s.close()


def snapshot_serial(path: Path) -> int:
    return int(json.loads(path.read_bytes())["state"]["config"]["serial_no"])


def job_ids(db: Path) -> tuple[int, list[int]]:
    conn = sqlite3.connect(db)
    try:
        last = conn.execute("SELECT value FROM meta WHERE key = 'last_job_id'").fetchone()[0]
        ids = [row[0] for row in conn.execute("SELECT id FROM jobs ORDER BY id")]
    finally:
        conn.close()
    return int(last), ids


def test_a_dir_outside_backups_is_invalid_params_naming_dir(stack: Stack, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    for bad in ("../out", str(outside), "a/../../b", "", "."):
        for call in (stack.wc.backup, stack.lc.backup):
            with pytest.raises(errors.InvalidParams) as caught:
                call(dir=bad)
            assert "`dir`" in caught.value.message, caught.value.message
    for daemon in (stack.wconfd, stack.luxid):
        assert not (daemon.state_dir / "backups").exists()
        assert not (daemon.state_dir / "out").exists()
    assert not outside.exists()


def test_backup_answers_path_files_and_its_point(stack: Stack) -> None:
    stack.add_nodes("n1")
    stack.wc.reserve("mac", "aa:00:00:00:00:01")
    job = stack.lc.submit_job([delay(0)])
    w = stack.wc.backup(dir="b1")
    folder = Path(w.path)
    assert folder == (stack.wconfd.state_dir / "backups" / "b1").resolve()
    assert w.serial == stack.wc.get_config()["serial_no"]
    assert w.files == {
        name: sha256_file(folder / name) for name in ("wconfd.snapshot.json", "audit.sqlite")
    }
    # The audit log comes along: every entry so far (the node's add; on etcd after the
    # master's taking over).
    methods = [e.method for e in read_file(folder / "audit.sqlite") if e.method != "failover"]
    assert methods == ["add_object"]
    assert snapshot_serial(folder / "wconfd.snapshot.json") == w.serial
    snapshot = json.loads((folder / "wconfd.snapshot.json").read_bytes())["state"]
    assert [e[1:] for e in snapshot["reservations"]["entries"]] == [["mac", "aa:00:00:00:00:01"]]
    x = stack.lc.backup(dir="b1/luxid")
    db = Path(x.path) / "jobs.sqlite"
    assert x.files == {"jobs.sqlite": sha256_file(db)}
    assert x.last_job_id >= job
    last, ids = job_ids(db)
    assert last == x.last_job_id and job in ids


def test_backup_under_writes_is_consistent(stack: Stack) -> None:
    """A writer adds nodes and submits jobs throughout; each backup's part is at one point:
    the snapshot's serial is the config's serial, and the job store holds every job up to
    its last_job_id and none above."""
    stop = threading.Event()
    wrote: list[int] = []

    def writer() -> None:
        n = 0
        with stack.admin() as wc, LuxiClient(stack.luxid.socket, timeout=30) as lc:
            while not stop.is_set():
                n += 1
                wc.add_object("node", {"name": f"w{n}"})
                wrote.append(lc.submit_job([delay(0)]))

    base = stack.wc.get_config()["serial_no"]
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for i in range(5):
            w = stack.wc.backup(dir=f"c{i}")
            snap = json.loads((Path(w.path) / "wconfd.snapshot.json").read_bytes())
            config = snap["state"]["config"]
            assert config["serial_no"] == w.serial
            # One node added per serial since the writer started: none half there.
            added = [o for o in config["nodes"].values() if o["name"].startswith("w")]
            assert len(added) == w.serial - base
            x = stack.lc.backup(dir=f"c{i}")
            last, ids = job_ids(Path(x.path) / "jobs.sqlite")
            assert last == x.last_job_id
            assert ids == list(range(1, last + 1))
    finally:
        stop.set()
        thread.join()
    assert len(wrote) > 5
