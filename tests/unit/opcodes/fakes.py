"""In-memory stand-ins for what the job process provides: config, locks, context.

`FakeConfig` follows docs/contracts.md#configuration (names unique, references checked, serial
numbers, lock enforcement against the locks the fake holds); `FakeLocks` checks requests against the
order rules of docs/contracts.md#lock-rules, so a lock plan that wconfd would refuse fails here too.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from client.capacity import Room, rooms, vcpu_ratio
from client.errors import (
    AlreadyExists,
    ConfigValidationError,
    InvalidParams,
    LockNotHeld,
    LockOrderError,
    NotFound,
    ReservationError,
    StaleObjectError,
)
from jobproc.opcodes import BGL, Canceled, LockPhase, LockPlan, OpCode, lock_sort_key
from jobproc.opcodes.registry import REGISTRY

KIND_LEVEL = {
    "node": "node",
    "instance": "instance",
    "nodegroup": "nodegroup",
    "network": "network",
}
DEFAULTS: dict[str, dict[str, Any]] = {
    "node": {
        "primary_ip": None,
        "offline": False,
        "drained": False,
        "master_candidate": False,
        "vm_capable": True,
    },
    "instance": {"secondary_nodes": [], "disks": [], "nics": [], "admin_state": "up"},
    "nodegroup": {},
    "network": {"gateway": None},
}


class FakeLocks:
    """A single client's locks, with the consistency and order checks of the lock rules."""

    def __init__(self) -> None:
        self.held: dict[str, str] = {}
        self.requests: list[list[list[str]]] = []

    def apply(self, request: list[list[str]]) -> None:
        """Apply one request atomically or raise InvalidParams / LockOrderError."""
        self.requests.append(request)
        names = [name for name, _ in request]
        if len(set(names)) != len(names):
            raise InvalidParams(f"two pairs for one lock in {request}")
        if self.held:
            highest = max(self.held, key=lock_sort_key)
            for name, mode in request:
                if mode == "release" or lock_sort_key(name) >= lock_sort_key(highest):
                    continue
                have = self.held.get(name)
                level_set = name.split("/")[0] + "/[lockset]"
                if have == "exclusive" or have == mode:
                    continue
                if self.held.get(level_set) == "exclusive" or (
                    mode == "shared" and level_set in self.held
                ):
                    continue
                raise LockOrderError(f"requesting {name} while holding {highest}")
        for name, mode in request:
            level_set = name.split("/")[0] + "/[lockset]"
            if mode == "exclusive" and name != level_set and self.held.get(level_set) == "shared":
                raise LockOrderError(f"{name} exclusive while holding {level_set} shared")
        for name, mode in request:
            if mode == "release":
                self.held.pop(name, None)
            else:
                self.held[name] = mode

    def holds_exclusive(self, name: str) -> bool:
        """True if `name` or its level's lockset is held exclusively."""
        level_set = name.split("/")[0] + "/[lockset]"
        return "exclusive" in (self.held.get(name), self.held.get(level_set))


class FakeConfig:
    """The configuration in memory; writes need the locks held in `locks`."""

    def __init__(self, locks: FakeLocks | None = None, *, enforce: bool = True) -> None:
        self.locks = locks or FakeLocks()
        self.enforce = enforce
        self._uuids = (f"uuid-{i}" for i in itertools.count(1))
        self.cluster: dict[str, Any] = {
            "uuid": "cluster-uuid",
            "name": "lockwarden",
            "serial_no": 1,
            "ctime": 0.0,
            "mtime": 0.0,
            "max_running_jobs": 20,
            "mac_prefix": "aa:00:00",
            "lock_enforcement": "enforce",
            "tags": [],
        }
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KIND_LEVEL}
        self.reservations: dict[tuple[str, str], str] = {}  # (ns, value) -> owner
        self._mac = itertools.count(1)
        self.writes: list[tuple[str, str, str]] = []  # (method, kind, name)
        self.seed("nodegroup", name="default")

    # -- test setup (no locks needed) --------------------------------------------------

    def seed(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Add an object directly, bypassing locks (test setup)."""
        obj = {
            "uuid": next(self._uuids),
            "serial_no": 1,
            "ctime": 0.0,
            "mtime": 0.0,
            "tags": [],
            **copy.deepcopy(DEFAULTS[kind]),
            **fields,
        }
        if kind == "node" and "group" not in fields:
            obj["group"] = self._find("nodegroup", "default")["uuid"]
        self.objects[kind][obj["uuid"]] = obj
        return copy.deepcopy(obj)

    def node(self, name: str, **fields: Any) -> dict[str, Any]:
        """Seed a node."""
        return self.seed("node", name=name, **fields)

    def instance(
        self,
        name: str,
        pnode: str,
        memory: int = 512,
        secondaries: tuple[str, ...] = (),
        vcpus: int = 1,
        **fields: Any,
    ) -> dict[str, Any]:
        """Seed an instance on node `pnode` (by name)."""
        return self.seed(
            "instance",
            name=name,
            primary_node=self._find("node", pnode)["uuid"],
            secondary_nodes=[self._find("node", s)["uuid"] for s in secondaries],
            memory=memory,
            vcpus=vcpus,
            **fields,
        )

    # -- ConfigReader -------------------------------------------------------------------

    def _find(self, kind: str, key: str) -> dict[str, Any]:
        if kind == "cluster":
            return self.cluster
        objs = self.objects[kind]
        if key in objs:
            return objs[key]
        for obj in objs.values():
            if obj["name"] == key:
                return obj
        raise NotFound(f"{kind} {key!r} not found")

    def get_object(self, kind: str, key: str) -> dict[str, Any]:
        return copy.deepcopy(self._find(kind, key))

    def list_objects(self, kind: str) -> list[dict[str, Any]]:
        if kind == "cluster":
            return [copy.deepcopy(self.cluster)]
        return [copy.deepcopy(o) for o in self.objects[kind].values()]

    def node_rooms(self, nodes: Sequence[str] | None = None) -> dict[str, Room]:
        """As wconfd's get_node_rooms: the room sums over every instance, the shared rule."""
        every = rooms(
            self.objects["node"].values(),
            self.objects["instance"].values(),
            vcpu_ratio(self.cluster),
        )
        if nodes is None:
            return every
        uuids = [self._find("node", n)["uuid"] for n in nodes]
        return {uuid: every[uuid] for uuid in uuids}

    # -- ConfigWriter -------------------------------------------------------------------

    def _need_lock(self, kind: str, name: str) -> None:
        needed = BGL if kind == "cluster" else f"{KIND_LEVEL[kind]}/{name}"
        if self.enforce and not self.locks.holds_exclusive(needed):
            raise LockNotHeld(f"writing {kind} {name!r} needs {needed} exclusive")

    def _check_refs(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "node" and obj.get("group") not in self.objects["nodegroup"]:
            raise ConfigValidationError(f"unknown node group {obj.get('group')!r}")
        if kind == "instance":
            for ref in [obj.get("primary_node"), *obj.get("secondary_nodes", [])]:
                if ref not in self.objects["node"]:
                    raise ConfigValidationError(f"unknown node {ref!r}")

    def add_object(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._need_lock(kind, obj["name"])
        if any(o["name"] == obj["name"] for o in self.objects[kind].values()):
            raise AlreadyExists(f"{kind} {obj['name']!r} exists")
        self._check_refs(kind, obj)
        new = {"tags": [], **copy.deepcopy(DEFAULTS[kind]), **copy.deepcopy(dict(obj))}
        new.setdefault("uuid", next(self._uuids))
        new.update(serial_no=1, ctime=time.time(), mtime=time.time())
        self.objects[kind][new["uuid"]] = new
        self.writes.append(("add_object", kind, new["name"]))
        return copy.deepcopy(new)

    def update_object(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        stored = self.cluster if kind == "cluster" else self.objects[kind][obj["uuid"]]
        self._need_lock(kind, stored["name"])
        if kind != "cluster":
            self._need_lock(kind, obj["name"])
        if obj["serial_no"] != stored["serial_no"]:
            raise StaleObjectError(f"serial_no {obj['serial_no']} != {stored['serial_no']}")
        self._check_refs(kind, obj)
        new = copy.deepcopy(dict(obj))
        new.update(serial_no=stored["serial_no"] + 1, mtime=time.time())
        if kind == "cluster":
            self.cluster = new
        else:
            self.objects[kind][new["uuid"]] = new
        self.writes.append(("update_object", kind, new["name"]))
        return {"serial_no": new["serial_no"], "mtime": new["mtime"]}

    def remove_object(self, kind: str, key: str) -> None:
        obj = self._find(kind, key)
        self._need_lock(kind, obj["name"])
        if kind == "node" and any(
            obj["uuid"] in [i["primary_node"], *i["secondary_nodes"]]
            for i in self.objects["instance"].values()
        ):
            raise ConfigValidationError(f"node {obj['name']!r} has instances")
        del self.objects[kind][obj["uuid"]]
        self.writes.append(("remove_object", kind, obj["name"]))

    def reserve(self, namespace: str, value: str, owner: str = "me") -> None:
        other = self.reservations.get((namespace, value))
        if other is not None and other != owner:
            raise ReservationError(f"{namespace} {value} is reserved by {other}")
        self.reservations[(namespace, value)] = owner

    def generate_mac(self) -> str:
        used = {n["mac"] for i in self.objects["instance"].values() for n in i["nics"]}
        while True:
            n = next(self._mac)
            mac = (
                f"{self.cluster['mac_prefix']}:{n >> 16 & 255:02x}:{n >> 8 & 255:02x}:{n & 255:02x}"
            )
            if mac not in used and ("mac", mac) not in self.reservations:
                self.reserve("mac", mac)
                return mac


class FakeContext(FakeConfig):
    """An `OpContext`: FakeConfig plus log, a recorded sleep with cancel, job submission."""

    def __init__(
        self,
        *,
        job_id: int = 42,
        priority: int = 0,
        cancel_at_sleep: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._job_id = job_id
        self._priority = priority
        self.cancel_at_sleep = cancel_at_sleep  # 1-based sleep call that sees the cancel
        self.logs: list[tuple[str, str]] = []
        self.sleeps: list[float] = []
        self.submitted: list[list[dict[str, Any]]] = []
        self._next_job = itertools.count(100)

    @property
    def job_id(self) -> int:
        return self._job_id

    @property
    def priority(self) -> int:
        return self._priority

    def log(self, message: str, type: str = "message") -> None:
        self.logs.append((type, message))

    def messages(self) -> list[str]:
        """The logged messages' texts."""
        return [m for _, m in self.logs]

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.cancel_at_sleep is not None and len(self.sleeps) >= self.cancel_at_sleep:
            raise Canceled()

    def submit_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[int]:
        for job in jobs:
            for op in job:
                REGISTRY.validate(op)  # what luxid would do
        self.submitted.extend(copy.deepcopy(jobs))
        return [next(self._next_job) for _ in jobs]


class EventSleepContext(FakeContext):
    """A context whose sleep really waits and wakes on `cancel()` (as the job process's)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._canceled = threading.Event()

    def cancel(self) -> None:
        self._canceled.set()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self._canceled.wait(seconds):
            raise Canceled()


def acquire(op: OpCode[Any], ctx: FakeConfig) -> list[LockPhase]:
    """Acquire `op`'s lock plan phase by phase into ctx.locks, as the job process would."""
    plan = op.locks(op.params, ctx)
    phases = []
    for i in range(len(plan)):
        phase = plan.phase(i, ctx)
        if phase.release:
            ctx.locks.apply(phase.release_request())
        if phase.acquire:
            ctx.locks.apply(phase.acquire_request())
        phases.append(phase)
    return phases


def resolve_all(plan: LockPlan, config: FakeConfig) -> list[LockPhase]:
    """All phases of `plan` resolved against one config (a job process never does this:
    it resolves phase i after acquiring phase i-1)."""
    return [plan.phase(i, config) for i in range(len(plan))]


def held_after(phases: list[LockPhase]) -> dict[str, str]:
    """The locks held after acquiring `phases` in order (releases applied)."""
    held: dict[str, str] = {}
    for ph in phases:
        for name in ph.release:
            held.pop(name, None)
        held.update(ph.acquire)
    return dict(sorted(held.items(), key=lambda kv: lock_sort_key(kv[0])))


def run(op: dict[str, Any], ctx: FakeConfig) -> Any:
    """Validate, lock and execute one opcode dict against the fake; returns the result.

    Each run starts without locks, as the job process frees them after every opcode.
    """
    ctx.locks.held.clear()
    opcode = REGISTRY.build(op)
    acquire(opcode, ctx)
    assert isinstance(ctx, FakeContext)
    return opcode.execute(ctx)
