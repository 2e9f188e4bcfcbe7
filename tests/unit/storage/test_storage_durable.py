"""ConfigStore / ReservationStore: the live write path (plan → locks → persist → apply)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import msgspec
import pytest
from storage_helpers import ENOSPC, FaultyOps

from client.errors import LockNotHeld, ReservationError, StorageError
from wconfd.config import ConfigChange, ConfigDocument
from wconfd.storage import ConfigStore, DurableStore, ReservationStore


def ids() -> itertools.count[int]:
    return itertools.count()


def test_fresh_config_is_on_disk_at_once(tmp_path: Path) -> None:
    counter = ids()
    cfg = ConfigStore.open(tmp_path, now=5.0, new_uuid=lambda: f"id{next(counter)}")
    uuid = cfg.state.cluster.uuid
    cfg.store.close()
    snap = json.loads((tmp_path / "config.snapshot.json").read_text())
    assert snap["seq"] == 0 and snap["state"]["cluster"]["name"] == "lockwarden"
    again = ConfigStore.open(tmp_path, now=99.0)
    assert again.state.cluster.uuid == uuid  # not regenerated
    again.store.close()
    # LocalStore implements the interface a replicated store will implement (SPEC §13).
    _: DurableStore[ConfigDocument, ConfigChange] = again.store


def test_writes_enforce_locks_and_persist(tmp_path: Path) -> None:
    async def main() -> bytes:
        cfg = ConfigStore.open(tmp_path, now=1.0)
        held: set[str] = set()
        with pytest.raises(LockNotHeld, match="node/n1"):
            await cfg.add_object("node", {"name": "n1"}, 2.0, holds_exclusive=held.__contains__)
        assert cfg.store.last_seq == 0  # nothing written
        held.add("node/n1")
        w = await cfg.add_object("node", {"name": "n1"}, 2.0, holds_exclusive=held.__contains__)
        assert w.warning is None and w.result.name == "n1"
        # warn mode: the write succeeds and the warning comes back
        cluster = msgspec.to_builtins(cfg.state.cluster) | {"lock_enforcement": "warn"}
        await cfg.update_object(
            "cluster", cluster, 3.0, holds_exclusive={"cluster/BGL"}.__contains__
        )
        w = await cfg.add_object("node", {"name": "n2"}, 4.0, holds_exclusive=held.__contains__)
        assert w.warning is not None and "node/n2" in w.warning
        # filters need no lock
        await cfg.add_object("filter", {"priority": 1}, 5.0, holds_exclusive=held.__contains__)
        node = msgspec.to_builtins(cfg.state.get_object("node", "n1"))
        w = await cfg.update_object("node", node | {"offline": True}, 6.0)
        assert w.result == {"serial_no": 2, "mtime": 6.0}
        await cfg.remove_object("filter", cfg.state.list_objects("filter")[0].uuid, 7.0)
        await cfg.aclose()
        return cfg.state.get_config_json()

    live = asyncio.run(main())
    again = ConfigStore.open(tmp_path, now=0.0)
    again.store.close()
    assert again.state.get_config_json() == live


def test_storage_failure_leaves_config_unchanged(tmp_path: Path) -> None:
    async def main() -> None:
        ops = FaultyOps()
        cfg = ConfigStore.open(tmp_path, now=1.0, file_ops=ops)
        await cfg.add_object("node", {"name": "n1"}, 2.0)
        before = cfg.state.get_config_json()
        ops.fail["pwrite_dsync"] = ENOSPC
        ops.once = True
        with pytest.raises(StorageError):
            await cfg.add_object("node", {"name": "n2"}, 3.0)
        assert cfg.state.get_config_json() == before
        await cfg.add_object("node", {"name": "n3"}, 4.0)
        await cfg.aclose()

    asyncio.run(main())
    again = ConfigStore.open(tmp_path, now=0.0)
    again.store.close()
    assert again.state.find("node", "n2") is None and again.state.find("node", "n3")


def test_background_snapshots_and_concurrent_writers(tmp_path: Path) -> None:
    async def main() -> bytes:
        cfg = ConfigStore.open(tmp_path, now=1.0, journal_limit=4096, snapshot_ratio=0)

        async def writer(w: int) -> None:
            for i in range(15):
                await cfg.add_object("nodegroup", {"name": f"g{w}-{i}"}, float(i))

        await asyncio.gather(*[writer(w) for w in range(6)])
        await cfg.aclose()
        assert cfg.store.stats.snapshots >= 2
        return cfg.state.get_config_json()

    live = asyncio.run(main())
    again = ConfigStore.open(tmp_path, now=0.0)
    again.store.close()
    assert again.state.get_config_json() == live
    assert again.state.count("nodegroup") == 91


def test_reservations_durable(tmp_path: Path) -> None:
    used = {"aa:00:00:00:00:01"}

    async def main() -> list[list[str]]:
        res = ReservationStore.open(tmp_path, journal_limit=512, snapshot_ratio=0)
        await res.reserve("a", "ip", "10.0.0.1")
        await res.reserve("a", "ip", "10.0.0.1")  # no-op
        with pytest.raises(ReservationError):
            await res.reserve("b", "ip", "10.0.0.1")
        with pytest.raises(ReservationError):
            await res.reserve("b", "mac", "AA:00:00:00:00:01", in_config=used.__contains__)
        macs = [
            await res.generate_mac("b", "aa:00:00", in_config=used.__contains__) for _ in range(20)
        ]
        assert len(set(macs)) == 20 and all(m.startswith("aa:00:00:") for m in macs)
        await res.release_reservation("b", "mac", macs[0])
        await res.reserve("c", "lv", "vg/x")
        await res.remove_owner("c")
        await res.release_reservations("a", "ip")
        await res.reserve("a", "lv", "vg/y")
        await res.aclose()
        assert res.store.stats.snapshots >= 1
        return res.table.list_reservations()

    live = asyncio.run(main())
    again = ReservationStore.open(tmp_path)
    again.store.close()
    assert again.table.list_reservations() == live
    assert len(live) == 20  # 19 MACs of b and a's lv
