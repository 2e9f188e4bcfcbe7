"""The lock journal records the change, not the holdings (docs/contracts.md#lock-rules, rule 7), and
the change records rebuild the table after kill -9."""

from __future__ import annotations

import msgspec
import pytest

from client import WConfdClient
from wconfd.durable_state import LockChange, Record
from wconfd.storage.journal_format import payload_of, scan

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.local_store("reads the records in wconfd.journal"),
]


def _records(state_dir) -> list[Record]:
    path = state_dir / "wconfd.journal"
    data = path.read_bytes()
    decoder = msgspec.msgpack.Decoder(Record)
    return [decoder.decode(payload_of(data, f)) for f in scan(data, str(path)).frames]


def test_a_further_lock_journals_one_pair_while_holding_500(wconfd):
    wc = WConfdClient(wconfd.socket, name="many")
    held = [[f"instance/h{i:04d}", "exclusive"] for i in range(500)]
    assert wc.try_update_locks(held) == []
    before = len(_records(wconfd.state_dir))
    assert wc.try_update_locks([["node/n1", "shared"]]) == []
    assert wc.try_update_locks([["node/n1", "exclusive"], ["node/n2", "shared"]]) == []
    assert wc.try_update_locks([["node/n1", "release"]]) == []
    wc.downgrade_locks_level("instance")  # 500 changes: 500 pairs, once
    new = _records(wconfd.state_dir)[before:]
    assert new == [
        LockChange(wc.client_id, [("node/n1", "shared")]),
        LockChange(wc.client_id, [("node/n1", "exclusive"), ("node/n2", "shared")]),
        LockChange(wc.client_id, [("node/n1", "release")]),
        LockChange(wc.client_id, [(name, "shared") for name, _ in held]),
    ]
    # replaying the changes after kill -9 gives the same table
    expected = sorted(tuple(pair) for pair in wc.list_locks())
    wconfd.kill()
    wconfd.start()
    observer = WConfdClient(wconfd.socket, name="observer")
    view = observer.list_all_locks()
    assert sorted((lk.name, lk.owners[0].mode) for lk in view.locks) == expected
    assert {o.client_id for lk in view.locks for o in lk.owners} == {wc.client_id}
