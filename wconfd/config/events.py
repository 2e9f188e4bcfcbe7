"""The event of a configuration change (docs/contracts.md#events): pure, derived from the
change record and the state it applies to, so the same journal gives the same events
live and at replay.

Topic `config`; `key` the object's lock name (`instance/web1`, `node/n1`, `cluster/BGL`),
or `<kind>/<uuid>` for the kinds no lock guards (filters; drains by their target);
action `add`, `update` or `remove`; `data` the kind, uuid and the object's serial
(`serial`, of the object as it was for a remove) and the config's serial_no after it.
"""

from __future__ import annotations

from typing import Any

from client.api.common import Event

from .enforcement import locks_for_write
from .objects import ConfigObject, Kind
from .records import RECORD_KIND, ConfigChange, RemoveObject
from .state import ConfigState

DAEMON = "wconfd"


def object_key(kind: Kind, obj: Any) -> str:
    """The event key of an object: its lock name, else `<kind>/<target or uuid>`."""
    if kind == "instance" and obj.name:  # most changes: their lock name, made directly
        return "instance/" + obj.name
    locks = locks_for_write(kind, None, obj)
    if locks:
        return locks[-1]
    return f"{kind}/{getattr(obj, 'target', None) or obj.uuid}"


def config_event(state: ConfigState, record: ConfigChange, index: int = 0) -> Event:
    """The event of `record`, given the state before it is applied; numbered `index`
    (0: not numbered yet, docs/contracts.md#events)."""
    old: ConfigObject | None
    if isinstance(record, RemoveObject):
        kind, uuid = record.kind, record.uuid
        old = state.by_uuid(kind, uuid)
        obj: Any = old
        action = "remove"
    else:
        kind, obj = RECORD_KIND[type(record)], record.obj
        uuid = obj.uuid
        old = state.cluster if kind == "cluster" else state.by_uuid(kind, uuid)
        action = "add" if old is None else "update"
    data = {
        "kind": kind,
        "uuid": uuid,
        "serial": getattr(obj, "serial_no", None),
        "config_serial": record.serial_no,
    }
    key = object_key(kind, obj) if obj is not None else f"{kind}/{uuid}"
    return Event(index, record.mtime, DAEMON, "config", action, key, data)
