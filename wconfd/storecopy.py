"""`python -m wconfd.storecopy`: wconfd's part of `lw store copy`
(docs/operations.md#moving-to-three-machines), read and written with wconfd's own
storage code.

The part is the snapshot file of a local store (`wconfd.snapshot.json`, as in a backup):
the configuration with its serial, the reservations, the durable locks.  Exported from a
stopped state directory by loading its store as wconfd does (snapshot + journal, on a
copy of the files, so SRC is never touched), or from etcd at one revision; imported into
a state directory as its snapshot, or onto etcd as the key layout's puts
(client/_server/etcd/LAYOUT.md), fenced under the leader key the copy holds.  Locks are
not carried onto etcd: their holders are gone (a restart would release them), and
reservations go there in the copy's name, so the first master releases them as those of
another node.  The audit log is the part's `audit.sqlite` (every entry, with its seq),
read from the state directory's file and the journal's notes, or from etcd's keys; put
back as that file, or as etcd's keys.

`lw store copy` runs it (client.cli.backup); the steps are those of
client._server.storetarget.run_tool.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import msgspec

from client._server.audit_sql import read_file, write_file
from client._server.etcd.audit import EtcdAudit
from client._server.etcd.batching import Change
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.url import EtcdStoreUrl
from client._server.storetarget import (
    COPY_NODE,
    Refused,
    Target,
    etcd_client,
    hold_locally,
    hold_on_etcd,
    run_tool,
)
from client.audit import AuditEntry
from client.backup import copy_atomic
from client.errors import ConfigValidationError
from wconfd.audit_log import AUDIT_FILE
from wconfd.backup import NAME, SNAPSHOT_FILE, write_snapshot
from wconfd.config.reservations import Reserve
from wconfd.config.state import ConfigState
from wconfd.durable_state import Snapshot
from wconfd.persistence import load_durable_state, open_local_store
from wconfd.storage.errors import StorageCorruptError
from wconfd.storage.etcd_keys import Keys, decode_state, document_ops, reservation_ops
from wconfd.storage.etcd_store import read_all
from wconfd.storage.snapshot import decode_snapshot

JOURNAL_FILE = f"{NAME}.journal"


def export(src: Target, folder: Path) -> dict[str, int]:
    """Write the stopped SRC's state as the part's snapshot file, and its audit log;
    {"serial": N}."""
    if src.path is not None:
        body, serial, entries = _read_local(src.path)
    else:
        assert src.url is not None
        body, serial, entries = asyncio.run(_read_etcd(src.url))
    write_snapshot(folder, body)
    write_file(folder / AUDIT_FILE, entries)
    return {"serial": serial}


def _read_local(state_dir: Path) -> tuple[bytes, int, list[AuditEntry]]:
    """The state of a stopped state directory, loaded from a copy of its files, and its
    audit log (the file, and the journal's notes not in it yet)."""
    files = [state_dir / SNAPSHOT_FILE, state_dir / JOURNAL_FILE]
    if not any(f.exists() for f in files):
        raise Refused(f"SRC holds no Lockwarden state ({state_dir} has no {SNAPSHOT_FILE})")
    entries = {e.seq: e for e in read_file(state_dir / AUDIT_FILE)}
    with tempfile.TemporaryDirectory(prefix="lw-store-copy-") as tmp:
        for f in files:
            if f.exists():
                shutil.copyfile(f, Path(tmp) / f.name)
        store = open_local_store(tmp)
        try:
            state = load_durable_state(
                store, on_audit=lambda note: entries.update((e.seq, e) for e in note.entries)
            )
        except StorageCorruptError as exc:
            raise Refused(f"SRC: {exc}") from None
        finally:
            store.close()
    return state.snapshot_json(), state.config.serial_no, [entries[s] for s in sorted(entries)]


async def _read_etcd(url: EtcdStoreUrl) -> tuple[bytes, int, list[AuditEntry]]:
    """The state under an etcd prefix, read at one revision, and the audit log."""
    keys = Keys(url.prefix)
    async with etcd_client(url) as client:
        kvs, _ = await read_all(client, keys)
        entries = await EtcdAudit(client, url.prefix, "wconfd").every()
    decoded = decode_state(keys, kvs)
    if decoded.config is None:
        raise Refused(f"SRC holds no Lockwarden configuration under {url.prefix}")
    snapshot = Snapshot(
        config=decoded.config, reservations=decoded.reservations, locks=decoded.locks
    )
    return msgspec.json.encode(snapshot), decoded.config.serial_no, entries


def write(folder: Path, dst: Target) -> None:
    """Write the part's snapshot into DST (checked, and empty, by the caller)."""
    path = folder / SNAPSHOT_FILE
    try:
        decoded = decode_snapshot(str(path), NAME, path.read_bytes(), Snapshot)
    except (OSError, StorageCorruptError) as exc:
        raise Refused(f"{SNAPSHOT_FILE}: {exc}") from None
    snapshot = decoded.state
    if not decoded.checked and dst.url is not None:
        # Edited by hand (no checksum): etcd's digest will vouch for every object, so
        # each is checked first, and stored as the checks leave it.
        try:
            config = ConfigState(snapshot.config).get_config()
        except ConfigValidationError as exc:
            raise Refused(f"{SNAPSHOT_FILE}: {exc.message}") from None
        snapshot = msgspec.structs.replace(snapshot, config=config)
    audit = folder / AUDIT_FILE
    if dst.path is not None:
        with hold_locally(dst.path, NAME):
            copy_atomic(path, dst.path / SNAPSHOT_FILE)
            if audit.exists():
                copy_atomic(audit, dst.path / AUDIT_FILE)
        return
    assert dst.url is not None
    asyncio.run(_write_etcd(snapshot, read_file(audit), dst.url))


async def _write_etcd(snapshot: Snapshot, entries: list[AuditEntry], url: EtcdStoreUrl) -> None:
    """The snapshot and the audit log as the key layout's puts, fenced by the leader key
    the copy holds."""
    keys = Keys(url.prefix)
    ops = document_ops(keys, snapshot.config)
    for owner, namespace, value in snapshot.reservations.entries:
        ops += reservation_ops(keys, COPY_NODE, Reserve(owner, namespace, value))
    async with etcd_client(url) as client, hold_on_etcd(client, url) as token:
        ops += EtcdAudit(client, url.prefix, "wconfd").put_ops(entries)
        writer = FencedWriter(client, f"{keys.root}/leader".encode(), token, name=NAME)
        await writer.commit_many([Change((op,)) for op in ops])


def main(argv: list[str] | None = None) -> int:
    """Run one step of wconfd's part of a copy (see the module docstring)."""
    return run_tool("python -m wconfd.storecopy", argv, export, write)


if __name__ == "__main__":
    sys.exit(main())
