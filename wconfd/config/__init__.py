"""The configuration core of wconfd: pure code, no files, sockets or clocks.

- `objects`: the document's msgspec Structs and wire conversion (InvalidParams on types).
- `validation`: field checks (ConfigValidationError naming object and field).
- `state`: `ConfigState` with O(1) reads/writes, plans (`Plan`) and `apply`, over
  `indexes` (the objects and their indexes) and `references` (uniqueness and references).
- `numbers`: the signed 64-bit bound every int of a payload must fit.
- `records`: the change records the journal stores.
- `enforcement`: which locks a write needs and the check (LockNotHeld / warning).
- `reservations`: the temporary reservation table.
"""

from .enforcement import check_locks, locks_for_write, missing_locks
from .objects import (
    KINDS,
    Cluster,
    ConfigDocument,
    ConfigObject,
    Disk,
    Filter,
    Instance,
    Kind,
    Network,
    Nic,
    Node,
    NodeGroup,
    check_kind,
    convert_object,
)
from .records import (
    ConfigChange,
    PutCluster,
    PutFilter,
    PutInstance,
    PutNetwork,
    PutNode,
    PutNodeGroup,
    RemoveObject,
)
from .reservations import (
    Release,
    ReleaseAll,
    ReservationChange,
    ReservationConflict,
    ReservationSnapshot,
    ReservationTable,
    Reserve,
)
from .state import ChangeOutOfOrder, ConfigState, Plan, new_uuid4

__all__ = [
    "KINDS",
    "ChangeOutOfOrder",
    "Cluster",
    "ConfigChange",
    "ConfigDocument",
    "ConfigObject",
    "ConfigState",
    "Disk",
    "Filter",
    "Instance",
    "Kind",
    "Network",
    "Nic",
    "Node",
    "NodeGroup",
    "Plan",
    "PutCluster",
    "PutFilter",
    "PutInstance",
    "PutNetwork",
    "PutNode",
    "PutNodeGroup",
    "Release",
    "ReleaseAll",
    "RemoveObject",
    "ReservationChange",
    "ReservationConflict",
    "ReservationSnapshot",
    "ReservationTable",
    "Reserve",
    "check_kind",
    "check_locks",
    "convert_object",
    "locks_for_write",
    "missing_locks",
    "new_uuid4",
]
