"""A state directory written before the change-record lock journal still loads, unchanged.

`tests/fixtures/wconfd_state_v1/` was written by wconfd at commit dcd3966
(`make_wconfd_state_v1.py`): its snapshot and journal hold whole-holdings lock records
(`HeldLocks`) of a holder that is dead now, reservations, and config objects.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from client import WConfdClient
from wconfd.durable_state import HeldLocks
from wconfd.persistence import load_durable_state, open_local_store

FIXTURE = Path(__file__).parent.parent / "fixtures" / "wconfd_state_v1"
DEAD = "job-7:10594:1796102692.33"

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.local_store("loads a state directory of local files written by an old wconfd"),
]


def _copy(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE, state)
    return state


def test_old_state_loads_with_its_locks_reservations_and_config(tmp_path):
    store = open_local_store(_copy(tmp_path))
    try:
        state = load_durable_state(store)
    finally:
        store.close()
    assert state.locks[DEAD] == dict(
        [
            ("cluster/BGL", "shared"),
            ("node/n1", "exclusive"),
            ("node/n2", "shared"),
            ("node-res/n1", "shared"),
        ]
    )
    assert "admin:10585:1796102692.03" not in state.locks  # freed in the journal
    assert sorted(state.reservations.list_reservations(DEAD)) == [
        [DEAD, "ip", "10.0.0.20"],
        [DEAD, "ip", "10.0.0.21"],
    ]
    names = {obj.name for obj in state.config.list_objects("instance")}
    assert names == {"i1", "i3"}
    assert state.config.get_object("node", "n2").primary_ip == "192.0.2.2"
    assert state.config.serial_no == 7


def test_daemon_on_old_state_releases_the_dead_and_keeps_the_living(tmp_path, daemon_factory):
    state_dir = _copy(tmp_path)
    me = psutil.Process(os.getpid())
    live = f"upgrade:{me.pid}:{me.create_time():.2f}"
    store = open_local_store(state_dir)
    try:
        load_durable_state(store)
        # A live holder's record in the old (whole-holdings) format, as the old code wrote.
        store.append_sync(HeldLocks(client_id=live, locks=[("instance/i3", "exclusive")]))
    finally:
        store.close()
    wconfd = daemon_factory("wconfd", "--log-level", "DEBUG").start()
    wc = WConfdClient(wconfd.socket, name="upgrade")
    assert [tuple(pair) for pair in wc.list_locks()] == [("instance/i3", "exclusive")]
    assert wc.client_id == live
    view = wc.list_all_locks()
    assert [(lk.name, [o.client_id for o in lk.owners]) for lk in view.locks] == [
        ("instance/i3", [live])
    ]
    assert wc.list_reservations() == []  # the dead holder's were released
    assert {o["name"] for o in wc.list_objects("instance")} == {"i1", "i3"}
    # the releases are durable: after kill -9 the dead holder stays gone, the live one stays
    wconfd.kill()
    wconfd.start()
    wc2 = WConfdClient(wconfd.socket, name="upgrade")
    assert [lk.name for lk in wc2.list_all_locks().locks] == ["instance/i3"]
    assert wc2.list_reservations() == []
    wc2.free_locks()
