"""LocalStore: durability, group commit, snapshots, torn tails, and injected failures."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from pathlib import Path

import msgspec
import pytest
from storage_helpers import EIO, ENOSPC, Delete, FaultyOps, Put, Rec, apply, make_store

from client.errors import StorageError
from wconfd.storage import FileOps, JournalCorruptError, SnapshotCorruptError, recover


def reload(path: Path, **kw: object) -> tuple[dict[str, int], list[Rec], int]:
    """Open a store in `path` afresh: (state, records replayed, last seq)."""
    store = make_store(path, **kw)  # type: ignore[arg-type]
    loaded = store.open()
    state = dict(loaded.snapshot or {})
    for rec in loaded.records:
        apply(state, rec)
    store.close()
    return state, loaded.records, loaded.last_seq


def test_sync_append_and_reload(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    loaded = store.open()
    assert loaded.snapshot is None and loaded.records == [] and loaded.last_seq == 0
    assert [store.append_sync(Put(key=f"k{i}", value=i)) for i in range(5)] == [1, 2, 3, 4, 5]
    store.append_sync(Delete(key="k0"))
    store.close()
    state, records, last = reload(tmp_path)
    assert state == {"k1": 1, "k2": 2, "k3": 3, "k4": 4}
    assert len(records) == 6 and last == 6
    assert os.path.exists(tmp_path / "toy.journal")


def test_async_group_commit(tmp_path: Path) -> None:
    applied: list[Rec] = []

    async def main() -> list[int]:
        store = make_store(tmp_path)
        store.open()
        seqs = await asyncio.gather(
            *[
                store.append(Put(key=f"k{i}", value=i), on_durable=applied.append)
                for i in range(200)
            ]
        )
        assert store.stats.writes < 20, store.stats  # 200 records share a few writes
        assert store.stats.max_batch > 10
        await store.aclose()
        return list(seqs)

    seqs = asyncio.run(main())
    assert seqs == list(range(1, 201))
    assert [r.value for r in applied] == list(range(200))  # type: ignore[union-attr]
    state, _, last = reload(tmp_path)
    assert last == 200 and state == {f"k{i}": i for i in range(200)}


@pytest.mark.parametrize("mode", ["inline", "thread"])
def test_sequential_and_concurrent_in_both_modes(tmp_path: Path, mode: str) -> None:
    async def main() -> None:
        store = make_store(tmp_path, sync_mode=mode, prealloc=4096)
        store.open()
        for i in range(50):
            assert await store.append(Put(key="seq", value=i)) == i + 1

        async def writer(w: int) -> None:
            for i in range(20):
                await store.append(Put(key=f"w{w}", value=i))

        await asyncio.gather(*[writer(w) for w in range(10)])
        assert store.stats.extensions > 0  # 4 KiB preallocation is outgrown
        await store.aclose()

    asyncio.run(main())
    state, _, last = reload(tmp_path)
    assert last == 250 and state["seq"] == 49
    assert all(state[f"w{w}"] == 19 for w in range(10))


def test_auto_mode_moves_slow_syncs_off_the_loop(tmp_path: Path) -> None:
    class Slow(FileOps):
        def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
            time.sleep(0.004)
            super().pwrite_dsync(fd, data, offset)

    async def main() -> None:
        store = make_store(tmp_path, Slow(), inline_threshold=0.002)
        store.open()
        for i in range(20):
            await store.append(Put(key="k", value=i))
        assert store.stats.inline_writes < 10  # switched to the thread after a few
        await store.aclose()

    asyncio.run(main())
    assert reload(tmp_path)[0] == {"k": 19}


def test_auto_mode_writes_on_the_loop_on_a_fast_disk_even_when_batches_are_shared(
    tmp_path: Path,
) -> None:
    """A fast disk: the journal's writes stay on the loop, alone or shared (a small write
    costs less than the thread hand-off); appends made meanwhile still share one write."""
    on_loop: list[bool] = []

    class Watched(FileOps):
        def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
            on_loop.append(threading.current_thread() is threading.main_thread())
            super().pwrite_dsync(fd, data, offset)

    async def main() -> None:
        store = make_store(tmp_path, Watched(), inline_threshold=1.0)  # never "slow"
        store.open()
        for i in range(10):
            await store.append(Put(key="lone", value=i))
        await asyncio.gather(*[store.append(Put(key=f"w{w}", value=w)) for w in range(8)])
        await asyncio.gather(*[store.append(Put(key=f"w{w}", value=-w)) for w in range(8)])
        assert store.stats.max_batch == 8  # each gather shared one write
        assert store.stats.inline_writes == 12 and on_loop and all(on_loop)
        await store.aclose()

    asyncio.run(main())
    state = reload(tmp_path)[0]
    assert state["lone"] == 9 and all(state[f"w{w}"] == -w for w in range(8))


def test_on_durable_runs_even_if_caller_cancelled(tmp_path: Path) -> None:
    applied: list[Rec] = []

    async def main() -> None:
        store = make_store(tmp_path, sync_mode="thread")
        store.open()
        task = asyncio.ensure_future(store.append(Put(key="a", value=1), applied.append))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await store.aclose()

    asyncio.run(main())
    assert applied == [Put(key="a", value=1)]
    assert reload(tmp_path)[0] == {"a": 1}


def test_torn_tail_at_every_offset_is_cut_and_appends_continue(tmp_path: Path) -> None:
    src = tmp_path / "src"
    store = make_store(src, prealloc=0)
    store.open()
    for i in range(3):
        store.append_sync(Put(key=f"k{i}", value=i))
    before_last = store.journal_bytes
    store.append_sync(Put(key="last", value=99))
    store.close()
    data = (src / "toy.journal").read_bytes()
    assert len(data) == store.journal_bytes
    for cut in range(before_last + 1, len(data)):
        for pad in (b"", bytes(64)):
            d = tmp_path / f"cut{cut}-{len(pad)}"
            d.mkdir()
            (d / "toy.journal").write_bytes(data[:cut] + pad)
            s = make_store(d, prealloc=0)
            loaded = s.open()
            assert [r.key for r in loaded.records] == ["k0", "k1", "k2"], cut
            assert 0 < loaded.torn_bytes <= cut - before_last  # trailing zeros not counted
            assert (d / "toy.journal").stat().st_size == before_last  # truncated away
            assert s.append_sync(Put(key="new", value=1)) == 4
            s.close()
            state, _, last = reload(d)
            assert last == 4 and state == {"k0": 0, "k1": 1, "k2": 2, "new": 1}


def test_snapshot_restarts_journal_and_reload_combines(tmp_path: Path) -> None:
    store = make_store(tmp_path, journal_limit=200, snapshot_ratio=0)
    store.open()
    state: dict[str, int] = {}
    for i in range(10):
        rec = Put(key=f"k{i}", value=i)
        store.append_sync(rec)
        apply(state, rec)
    assert store.snapshot_due
    store.snapshot_sync(dict(state))
    assert store.journal_bytes == 0 and store.snapshot_seq == 10 and not store.snapshot_due
    for rec in (Put(key="k0", value=100), Delete(key="k1")):
        store.append_sync(rec)
        apply(state, rec)
    store.close()
    text = (tmp_path / "toy.snapshot.json").read_text()
    # Compact, on one line, the header first: the state's bytes are the checksummed ones.
    assert text.startswith('{"format":"lockwarden-snapshot"') and '"seq":10' in text
    assert text.count("\n") == 1
    loaded_state, records, last = reload(tmp_path)
    assert loaded_state == state and len(records) == 2 and last == 12


def test_indented_snapshot_loads_checked(tmp_path: Path) -> None:
    """A snapshot written indented (older files, or a store told to) loads as checked: its
    state is compacted before the checksum is compared, and decoded from the compact form."""
    store = make_store(tmp_path, indent=2)
    store.open()
    store.snapshot_sync({"k0": 0, "k1": 1})
    store.close()
    text = (tmp_path / "toy.snapshot.json").read_text()
    assert '\n  "seq": 0' in text
    store = make_store(tmp_path)
    loaded = store.open()
    store.close()
    assert loaded.snapshot == {"k0": 0, "k1": 1} and loaded.checked


def test_snapshot_of_older_seq_keeps_the_tail(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    for i in range(6):
        store.append_sync(Put(key=f"k{i}", value=i))
    store.snapshot_sync({f"k{i}": i for i in range(4)}, 4)
    store.append_sync(Put(key="k9", value=9))
    store.close()
    state, records, last = reload(tmp_path)
    assert [r.key for r in records] == ["k4", "k5", "k9"]
    assert state == {**{f"k{i}": i for i in range(6)}, "k9": 9} and last == 7
    with pytest.raises(ValueError, match="outside"):
        s = make_store(tmp_path)
        s.open()
        try:
            s.snapshot_sync({}, 99)
        finally:
            s.close()


def test_async_snapshot_while_appending(tmp_path: Path) -> None:
    async def main() -> dict[str, int]:
        store = make_store(tmp_path)
        store.open()
        state: dict[str, int] = {}

        async def writer(w: int) -> None:
            for i in range(30):
                await store.append(Put(key=f"w{w}", value=i), lambda r: apply(state, r))
                if w == 0 and i % 10 == 5:
                    await store.snapshot(dict(state))

        await asyncio.gather(*[writer(w) for w in range(4)])
        assert store.stats.snapshots >= 2
        await store.aclose()
        return state

    live = asyncio.run(main())
    assert reload(tmp_path)[0] == live


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda t: t[: len(t) // 2], "not a valid snapshot"),
        (lambda t: "", "not a valid snapshot"),
        (lambda t: re.sub(r'"k1": ?1', '"k1": 7', t), "checksum mismatch"),
        (lambda t: t.replace('"toy"', '"other"'), "expected 'toy'"),
        (lambda t: t.replace("lockwarden-snapshot", "x"), "format"),
        (
            lambda t: re.sub(r'"k1": ?1', '"k1": "one"', t).replace('"crc32"', '"crc32x"'),
            "not a valid snapshot",
        ),
    ],
)
@pytest.mark.parametrize("indent", [-1, 1])  # compact (written now), indented (older files)
def test_corrupt_snapshot_refused(tmp_path: Path, mutate, needle: str, indent: int) -> None:  # type: ignore[no-untyped-def]
    store = make_store(tmp_path, indent=indent)
    store.open()
    store.append_sync(Put(key="k1", value=1))
    store.snapshot_sync({"k1": 1})
    store.close()
    path = tmp_path / "toy.snapshot.json"
    path.write_text(mutate(path.read_text()))
    with pytest.raises(SnapshotCorruptError) as err:
        make_store(tmp_path).open()
    assert err.value.path == str(path)
    assert needle in err.value.reason


def test_snapshot_without_crc_is_accepted_and_bad_state_type_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    store.snapshot_sync({"k": 1})
    store.close()
    path = tmp_path / "toy.snapshot.json"
    doc = json.loads(path.read_text())
    del doc["crc32"]
    doc["state"] = {"k": 5}
    path.write_text(json.dumps(doc))
    assert reload(tmp_path)[0] == {"k": 5}
    doc["state"] = {"k": "five"}
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotCorruptError, match="invalid state"):
        make_store(tmp_path).open()


def test_journal_gap_after_snapshot_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    for i in range(5):
        store.append_sync(Put(key="k", value=i))
    store.close()
    # A snapshot that claims less than the journal's first record follows.
    from wconfd.storage.snapshot import encode_snapshot, write_atomic

    store2 = make_store(tmp_path)
    store2.open()
    store2.snapshot_sync({"k": 1}, 2)  # journal restarts at seq 3
    store2.close()
    write_atomic(
        str(tmp_path / "toy.snapshot.json"), encode_snapshot("toy", 1, b'{"k":0}'), FileOps()
    )
    assert json.loads((tmp_path / "toy.snapshot.json").read_text())["state"] == {"k": 0}
    with pytest.raises(JournalCorruptError, match="records are missing"):
        make_store(tmp_path).open()


@pytest.mark.parametrize(
    ("call", "partial", "prealloc"),
    [
        ("pwrite_dsync", False, 1 << 16),  # into preallocated space: one RWF_DSYNC write
        ("pwrite_dsync", True, 1 << 16),
        ("pwrite", False, 0),  # growing the file: pwrite + fdatasync
        ("pwrite", True, 0),
        ("fdatasync", False, 0),
    ],
)
@pytest.mark.parametrize("code", [ENOSPC, EIO])
def test_failed_write_raises_and_changes_nothing(
    tmp_path: Path, call: str, partial: bool, prealloc: int, code: int
) -> None:
    ops = FaultyOps()
    store = make_store(tmp_path, ops, prealloc=prealloc)
    store.open()
    store.append_sync(Put(key="a", value=1))
    size_before = (tmp_path / "toy.journal").read_bytes()
    ops.fail[call] = code
    ops.partial = partial
    ops.once = True
    with pytest.raises(StorageError) as err:
        store.append_sync(Put(key="b", value=2))
    assert err.value.data["errno"] == code
    assert store.broken is None
    assert (tmp_path / "toy.journal").read_bytes() == size_before  # undone on disk
    assert store.append_sync(Put(key="c", value=3)) == 2  # the failed record took no seq
    store.close()
    state, _, last = reload(tmp_path)
    assert state == {"a": 1, "c": 3} and last == 2


def test_failed_async_batch_fails_every_waiter_and_state_stays(tmp_path: Path) -> None:
    ops = FaultyOps()
    applied: dict[str, int] = {}

    async def main() -> None:
        store = make_store(tmp_path, ops)
        store.open()
        await store.append(Put(key="a", value=1), lambda r: apply(applied, r))
        ops.fail["pwrite_dsync"] = ENOSPC
        results = await asyncio.gather(
            *[
                store.append(Put(key=f"x{i}", value=i), lambda r: apply(applied, r))
                for i in range(5)
            ],
            return_exceptions=True,
        )
        assert all(isinstance(r, StorageError) for r in results)
        ops.fail.clear()
        assert await store.append(Put(key="b", value=2), lambda r: apply(applied, r)) == 2
        await store.aclose()

    asyncio.run(main())
    assert applied == {"a": 1, "b": 2}
    assert reload(tmp_path)[0] == applied


def test_a_write_that_crashes_on_the_store_thread_fails_its_batch_and_breaks_the_store(
    tmp_path: Path,
) -> None:
    """Not an OSError (a bug in the I/O code) on the store's thread: the waiters get a
    StorageError, nothing is applied, and the store refuses further writes (it cannot
    know what reached the disk) - instead of the loop never hearing back."""

    class Crashing(FileOps):
        crash = False

        def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
            if self.crash:
                raise ValueError("bug in the write path")
            super().pwrite_dsync(fd, data, offset)

    ops = Crashing()
    applied: dict[str, int] = {}

    async def main() -> None:
        store = make_store(tmp_path, ops, sync_mode="thread")
        store.open()
        await store.append(Put(key="a", value=1), lambda r: apply(applied, r))
        ops.crash = True
        with pytest.raises(StorageError, match="bug in the write path"):
            await store.append(Put(key="b", value=2), lambda r: apply(applied, r))
        assert store.broken is not None and "write crashed" in store.broken
        with pytest.raises(StorageError, match="broken"):
            await store.append(Put(key="c", value=3))
        await store.aclose()

    asyncio.run(main())
    assert applied == {"a": 1}
    assert reload(tmp_path)[0] == {"a": 1}


def test_undo_failure_breaks_the_store_and_reload_recovers(tmp_path: Path) -> None:
    ops = FaultyOps()
    store = make_store(tmp_path, ops, prealloc=0)
    store.open()
    store.append_sync(Put(key="a", value=1))
    ops.fail["fdatasync"] = EIO
    ops.fail["ftruncate"] = EIO
    with pytest.raises(StorageError):
        store.append_sync(Put(key="b", value=2))
    assert store.broken is not None
    ops.fail.clear()
    with pytest.raises(StorageError, match="broken"):
        store.append_sync(Put(key="c", value=3))
    store.close()
    # The unacknowledged record may or may not be on disk; what was acknowledged is.
    state, _, _ = reload(tmp_path)
    assert state["a"] == 1


def test_failed_snapshot_keeps_old_state(tmp_path: Path) -> None:
    ops = FaultyOps()
    store = make_store(tmp_path, ops)
    store.open()
    store.append_sync(Put(key="a", value=1))
    ops.fail["replace"] = ENOSPC
    with pytest.raises(StorageError, match="snapshot"):
        store.snapshot_sync({"a": 1})
    assert not (tmp_path / "toy.snapshot.json.tmp").exists()
    store.append_sync(Put(key="b", value=2))
    store.close()
    assert reload(tmp_path)[0] == {"a": 1, "b": 2}


def test_failed_journal_restart_after_snapshot_is_harmless(tmp_path: Path) -> None:
    ops = FaultyOps()
    store = make_store(tmp_path, ops)
    store.open()
    store.append_sync(Put(key="a", value=1))
    real_replace = FileOps.replace
    count = {"n": 0}

    def replace_second_fails(self: FileOps, src: str, dst: str) -> None:
        count["n"] += 1
        if count["n"] == 2:  # 1: the snapshot, 2: the restarted journal
            raise OSError(ENOSPC, "full")
        real_replace(self, src, dst)

    ops.replace = replace_second_fails.__get__(ops)  # type: ignore[method-assign]
    with pytest.raises(StorageError, match="journal could not be restarted"):
        store.snapshot_sync({"a": 1})
    store.append_sync(Put(key="b", value=2))
    store.close()
    state, records, last = reload(tmp_path)
    assert state == {"a": 1, "b": 2} and last == 2
    assert records == [Put(key="b", value=2)]  # record 1 is in the snapshot


def test_recover_helper(tmp_path: Path) -> None:
    calls = {"initial": 0}

    def initial() -> dict[str, int]:
        calls["initial"] += 1
        return {"fresh": calls["initial"]}

    store = make_store(tmp_path)
    state = recover(store, initial=initial, from_snapshot=dict, apply=apply, to_snapshot=dict)
    assert state == {"fresh": 1}
    store.append_sync(Put(key="x", value=1))
    store.close()
    store = make_store(tmp_path)
    state = recover(store, initial=initial, from_snapshot=dict, apply=apply, to_snapshot=dict)
    store.close()
    assert state == {"fresh": 1, "x": 1} and calls["initial"] == 1
    os.unlink(tmp_path / "toy.snapshot.json")
    with pytest.raises(SnapshotCorruptError, match="missing"):
        recover(
            make_store(tmp_path), initial=initial, from_snapshot=dict, apply=apply, to_snapshot=dict
        )


def test_records_are_msgspec_typed(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.open()
    with pytest.raises(TypeError):
        store.append_sync(object())  # type: ignore[arg-type]
    store.close()
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(Put(key="a", value=1)), type=Rec) == Put(
        key="a", value=1
    )


def test_reopen_keeps_preallocation_and_restarts_obsolete_journal(tmp_path: Path) -> None:
    store = make_store(tmp_path, prealloc=8192)
    store.open()
    store.append_sync(Put(key="a", value=1))
    store.snapshot_sync({"a": 1})  # journal restarted: zeros only
    store.close()
    size = (tmp_path / "toy.journal").stat().st_size
    assert size >= 8192
    s = make_store(tmp_path, prealloc=8192)
    loaded = s.open()
    assert loaded.records == [] and loaded.torn_bytes == 0 and loaded.last_seq == 1
    assert (tmp_path / "toy.journal").stat().st_size == size  # preallocation kept
    assert s.append_sync(Put(key="b", value=2)) == 2
    s.close()
    assert reload(tmp_path)[0] == {"a": 1, "b": 2}
