"""The configuration survives crashes and refuses damage (docs/contracts.md#serials-and-durability),
on a real wconfd.

- kill -9 at random moments under a stream of concurrent writes from another process:
  after a restart every acknowledged write is there, and nothing that was never sent.
- A torn journal tail (the file cut inside its last record) is dropped with a warning.
- A damaged snapshot or journal makes wconfd exit 1 with a clear message, no traceback.
- A failed write (StorageError) changes nothing and the daemon keeps serving: through the
  real daemon with a real write error (EFBIG from RLIMIT_FSIZE), and in-process with an
  injected ENOSPC / EIO (tests/integration/test_config_storage_faults.py).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import WConfdClient, errors
from wconfd.storage.journal_format import HEADER, scan

pytestmark = pytest.mark.timeout(90)

# A writer process: several concurrent streams over one pipelined async connection, each
# printing a "send" line before a call and an "ack" line after its answer, with the state
# the object has once the call lands (None: gone).  One more stream rewrites one filter
# with a ~400 KB reason trail, so the journal passes its bound and wconfd snapshots (and
# restarts its journal) every few hundred milliseconds: kills land in those too.
WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from client import AsyncWConfdClient, errors

    sock, tag, streams = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def emit(**event):
        print(json.dumps(event), flush=True)

    async def call(wc, t, kind, name, state, make):
        emit(ev="send", t=t, kind=kind, name=name, state=state)
        result = await make()
        emit(ev="ack", t=t, kind=kind, name=name, state=state)
        return result

    async def stream(wc, t):
        for k in range(100000):
            base = f"{tag}-{t}-{k}"
            node, inst = base + "n", base + "i"
            mac = "aa:%02x:%02x:%02x:%02x:%02x" % (
                int(tag[1:]) % 256, t, k // 65536 % 256, k // 256 % 256, k % 256)
            await call(wc, t, "node", node, "present",
                       lambda: wc.add_object("node", {"name": node}))
            obj = await call(wc, t, "instance", inst, "present", lambda: wc.add_object(
                "instance", {"name": inst, "primary_node": node, "nics": [{"mac": mac}]}))
            await call(wc, t, "instance", inst, 256,
                       lambda: wc.update_object("instance", {**obj, "memory": 256}))
            if k % 2:
                await call(wc, t, "instance", inst, None,
                           lambda: wc.remove_object("instance", inst))
                await call(wc, t, "node", node, None,
                           lambda: wc.remove_object("node", node))

    async def big_filter(wc):
        big = "00000000-0000-4000-8000-000000000b16"  # a large object: a valid filter rule
        filler = [["filler", "x" * 100, 0]] * 3000
        try:
            flt = await wc.get_object("filter", big)
        except errors.NotFound:
            flt = await call(wc, "f", "filter", big, "new", lambda: wc.add_object(
                "filter", {"uuid": big, "reason_trail": [["test", "new", 0]] + filler}))
        for k in range(100000):
            version = f"{tag}-{k}"
            new = {**flt, "reason_trail": [["test", version, 0]] + filler}
            result = await call(wc, "f", "filter", big, version,
                                lambda: wc.update_object("filter", new))
            flt = {**new, "serial_no": result.serial_no}

    async def main():
        wc = AsyncWConfdClient(sock, name="writer")
        locks = [["instance/[lockset]", "exclusive"], ["node/[lockset]", "exclusive"]]
        assert await wc.try_update_locks(locks) == []
        emit(ev="ready")
        await asyncio.gather(big_filter(wc), *(stream(wc, t) for t in range(streams)))

    asyncio.run(main())
    """
)


def actual_states(doc: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """Every node, instance and filter of a config document as (kind, name) -> state."""
    states: dict[tuple[str, str], Any] = {}
    for node in doc["nodes"].values():
        states[("node", node["name"])] = "present"
    for inst in doc["instances"].values():
        states[("instance", inst["name"])] = "present" if inst["memory"] == 128 else inst["memory"]
    for flt in doc["filters"].values():
        states[("filter", flt["uuid"])] = flt["reason_trail"][0][1]
    return states


def run_writer_until_killed(wconfd: Any, tag: str, rng: random.Random) -> list[dict[str, Any]]:
    """Start a writer, kill -9 wconfd at a random moment once a first write was
    acknowledged (a restarted wconfd on etcd may take longer than the shortest pause to
    answer its first), then the writer; its events."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(wconfd.socket), tag, "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    head: list[str] = []
    try:
        assert writer.stdout is not None
        assert json.loads(writer.stdout.readline()) == {"ev": "ready"}
        while line := writer.stdout.readline():  # up to the first acknowledgement
            head.append(line)
            if json.loads(line)["ev"] == "ack":
                break
        time.sleep(rng.uniform(0.0, 0.4))
        wconfd.kill()
    finally:
        writer.kill()
        out = writer.stdout.read() if writer.stdout else ""  # the buffered rest, then EOF
        writer.wait(10)
    events = []
    for line in [*head, *out.splitlines()]:
        with contextlib.suppress(ValueError):  # a line cut by the kill: ignore it
            events.append(json.loads(line))
    return events


def test_kill9_under_writes_keeps_exactly_the_acknowledged(daemon_factory):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    wconfd = daemon_factory("wconfd").start()
    reader = WConfdClient(wconfd.socket, name="reader")
    model: dict[tuple[str, str], Any] = {}  # what must be there (resolved after each crash)
    landed = 0  # config writes that are in the config
    base_serial = reader.get_config()["serial_no"]
    acked_total = 0
    snapshot = wconfd.state_dir / "wconfd.snapshot.json"
    snapshot_seqs: set[int] = set()
    on_local_files = wconfd.placement is None  # not under --store etcd (tests/conftest.py)
    for iteration in range(10):
        events = run_writer_until_killed(wconfd, f"w{iteration}", rng)
        in_flight: dict[Any, dict[str, Any]] = {}
        acked = 0
        for ev in events:
            if ev["ev"] == "send":
                in_flight[ev["t"]] = ev
            else:
                assert in_flight.pop(ev["t"])["name"] == ev["name"]
                model[(ev["kind"], ev["name"])] = ev["state"]
                acked += 1
        assert acked > 0, f"seed {seed}: no write acknowledged before the kill"
        acked_total += acked
        landed += acked

        if on_local_files:
            snapshot_seqs.add(json.loads(snapshot.read_bytes())["seq"])
        wconfd.start()
        doc = reader.get_config()
        actual = actual_states(doc)
        # Unacknowledged writes may or may not have landed; each is all or nothing.
        for ev in in_flight.values():
            key = (ev["kind"], ev["name"])
            if actual.get(key) == ev["state"] and model.get(key) != ev["state"]:
                model[key] = ev["state"]
                landed += 1
        expected = {key: state for key, state in model.items() if state is not None}
        assert actual == expected, f"seed {seed}, iteration {iteration}"
        # Nothing else: every config change that is there is one of the writes sent.
        assert doc["serial_no"] == base_serial + landed, f"seed {seed}"
        assert "Traceback" not in wconfd.log()
    assert acked_total >= 30, f"seed {seed}: only {acked_total} writes acknowledged"
    if on_local_files:
        assert len(snapshot_seqs) >= 3, f"seed {seed}: too few snapshots taken: {snapshot_seqs}"
    # The writers are dead: their locks did not survive the restarts.
    assert reader.list_all_locks().locks == []


def admin(wconfd: Any) -> WConfdClient:
    """A client (this process) holding node/[lockset] exclusively."""
    wc = WConfdClient(wconfd.socket, name="admin")
    assert wc.try_update_locks([["node/[lockset]", "exclusive"]]) == []
    return wc


@pytest.mark.local_store("cuts wconfd.journal's bytes")
@pytest.mark.parametrize("cut", ["in-header", "in-payload", "last-byte", "garbled"])
def test_torn_journal_tail_is_ignored(daemon_factory, cut):
    wconfd = daemon_factory("wconfd").start()
    wc = admin(wconfd)
    for i in range(5):
        wc.add_object("node", {"name": f"n{i}"})
    serial = wc.get_config()["serial_no"]
    wconfd.kill()

    journal = wconfd.state_dir / "wconfd.journal"
    data = journal.read_bytes()
    last = scan(data, str(journal)).frames[-1]  # the add of n4
    if cut == "garbled":  # a torn write that left junk where the record should be
        with open(journal, "r+b") as f:
            f.seek(last.start + HEADER.size + 2)
            f.write(b"\xff\x00\xfe")
    else:
        offset = {"in-header": 5, "in-payload": HEADER.size + 3, "last-byte": -1}[cut]
        os.truncate(journal, last.start + offset if offset > 0 else last.end + offset)

    wconfd.start()
    assert "torn journal tail" in wconfd.log()
    assert "Traceback" not in wconfd.log()
    doc = wc.get_config()
    assert doc["serial_no"] == serial - 1
    assert sorted(n["name"] for n in doc["nodes"].values()) == ["n0", "n1", "n2", "n3"]
    # The journal goes on from the cut: new writes are kept over a clean restart.
    wc.add_object("node", {"name": "n5"})
    assert wconfd.stop() == 0
    wconfd.start()
    names = sorted(n["name"] for n in wc.get_config()["nodes"].values())
    assert names == ["n0", "n1", "n2", "n3", "n5"]
    assert wc.get_config()["serial_no"] == serial


def _corrupt_crc(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"lockwarden"', b'"lockwardeN"', 1))


def _not_json(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40] + b"\x00garbage")


def _bad_reference(path: Path) -> None:
    # Hand-edited (crc32 removed, as the operator is told to) but inconsistent: a node in
    # a group that does not exist.
    snap = json.loads(path.read_bytes())
    del snap["crc32"]
    node = {"uuid": "x1", "name": "x1", "group": "no-such-group"}
    snap["state"]["config"]["nodes"] = {"x1": node}
    path.write_text(json.dumps(snap))


@pytest.mark.local_store("damages wconfd.snapshot.json")
@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_corrupt_crc, "checksum mismatch"),
        (_not_json, "not a valid snapshot file"),
        (_bad_reference, "no nodegroup 'no-such-group'"),
    ],
)
def test_corrupt_snapshot_refuses_to_start(daemon_factory, damage, says):
    wconfd = daemon_factory("wconfd").start()
    assert wconfd.stop() == 0
    snapshot = wconfd.state_dir / "wconfd.snapshot.json"
    damage(snapshot)

    wconfd.start(wait=False)
    assert wconfd.proc is not None
    assert wconfd.proc.wait(15) == 1
    log = wconfd.log()
    assert "CRITICAL" in log and "wconfd cannot run" in log, log
    assert says in log, log
    assert "Traceback" not in log, log
    assert not wconfd.socket.exists() or not _accepts(wconfd.socket)


def _accepts(path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


@pytest.mark.local_store("damages wconfd.journal")
def test_damaged_journal_before_later_writes_refuses_to_start(daemon_factory):
    wconfd = daemon_factory("wconfd").start()
    wc = admin(wconfd)
    for i in range(3):
        wc.add_object("node", {"name": f"n{i}"})
    wconfd.kill()
    journal = wconfd.state_dir / "wconfd.journal"
    first = scan(journal.read_bytes(), str(journal)).frames[0]
    with open(journal, "r+b") as f:  # damage an early, acknowledged record
        f.seek(first.start + HEADER.size)
        f.write(b"\xff\xff")
    wconfd.start(wait=False)
    assert wconfd.proc is not None
    assert wconfd.proc.wait(15) == 1
    log = wconfd.log()
    assert "acknowledged records lost" in log, log
    assert "Traceback" not in log, log


# -- StorageError through the real daemon: a file-size limit makes the write fail -----------

# The journal is preallocated 1 MiB at a time: with this limit, records fit until a write
# has to go past 1 MiB + 64 KiB, which fails with EFBIG (and is undone).
LIMIT = (1 << 20) + (64 << 10)


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Processes started meanwhile get RLIMIT_FSIZE = `limit` (writes past it: EFBIG).

    Python ignores SIGXFSZ, so the daemon sees the failed write as an OSError, exactly as
    it would see a full disk.
    """
    real = subprocess.Popen
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

    def limited(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        return real(*args, **kwargs)

    subprocess.Popen = limited  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        subprocess.Popen = real  # type: ignore[misc]


def big_trail(seed: str) -> list[list[Any]]:
    """A (valid) reason trail of ~2 MB: one such record cannot fit under LIMIT."""
    return [["test", f"{seed}:{i:0100d}", i] for i in range(20000)]


@pytest.mark.local_store("a write error from RLIMIT_FSIZE on the journal file")
def test_storage_error_on_a_failed_write_changes_nothing(daemon_factory):
    wconfd = daemon_factory("wconfd")
    with file_size_limit(LIMIT):
        wconfd.start()
    wc = admin(wconfd)
    wc.add_object("node", {"name": "n1"})
    flt = wc.add_object("filter", {"action": "ACCEPT", "reason_trail": [["test", "small", 0]]})
    before = wc.get_config()

    for call, args in [
        (wc.update_object, ("filter", {**flt, "reason_trail": big_trail("b")})),
        (wc.add_object, ("filter", {"action": "REJECT", "reason_trail": big_trail("c")})),
    ]:
        with pytest.raises(errors.StorageError) as info:
            call(*args)
        err = info.value
        assert err.data["type"] == "StorageError"
        assert err.data["errno"] == errno.EFBIG
        assert "nothing was changed" in err.message
        # The in-memory state is as it was; no watcher sees a change.
        assert wc.get_config() == before
        assert wc.wait_config_change(before["serial_no"], 0) == before["serial_no"]
    # The daemon keeps serving, writes included.
    assert wc.ping() == "pong"
    small = wc.add_object("node", {"name": "n3"})
    assert wc.get_object("node", "n3") == small
    assert wc.update_object("filter", {**flt, "priority": 1}).serial_no == 2
    assert wconfd.proc is not None and wconfd.proc.poll() is None

    # A restart (without the limit) finds exactly the acknowledged writes.
    wconfd.stop(signal.SIGKILL)
    wconfd.start()
    after = wc.get_config()
    assert after["serial_no"] == before["serial_no"] + 2
    assert after["nodes"] == {**before["nodes"], small["uuid"]: small}
    assert [f["priority"] for f in after["filters"].values()] == [1]
    assert "Traceback" not in wconfd.log()
