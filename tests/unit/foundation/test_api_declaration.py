"""One declaration per method: the server table and both stubs derive from it."""

from __future__ import annotations

import inspect
from typing import Annotated

import msgspec
import pytest

from client import AsyncLuxiClient, AsyncWConfdClient, LuxiClient, WConfdClient, errors
from client._server.audit import AuditQueries
from client._server.common import CommonMethods
from client._server.dispatch import build_methods
from client.api.declare import Api, Check, rpc
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi
from luxid.backup import Backups as LuxidBackups
from luxid.service import LuxidService
from wconfd.backup import Backups as WconfdBackups
from wconfd.config_service import ConfigService
from wconfd.lock_service import LockService
from wconfd.reservation_service import ReservationService
from wconfd.service import WConfd


@pytest.mark.parametrize(
    ("api", "stubs", "service"),
    [
        (
            WConfdApi,
            (WConfdClient, AsyncWConfdClient),
            (
                CommonMethods,
                WConfd,
                LockService,
                ConfigService,
                ReservationService,
                WconfdBackups,
                AuditQueries,
            ),
        ),
        (LuxiApi, (LuxiClient, AsyncLuxiClient), (LuxidService, LuxidBackups, AuditQueries)),
    ],
)
def test_server_and_stubs_come_from_the_declaration(api, stubs, service):
    declared = set(api.methods())
    assert {"ping", "version"} <= declared
    # The method table checks the service's methods against the declaration; no state
    # is needed for that, so the service is not initialised.
    assert set(build_methods(api, *(cls.__new__(cls) for cls in service))) == declared
    for stub in stubs:
        for name, spec in api.methods().items():
            method = getattr(stub, name)
            assert method.__doc__ == spec.doc
            if stub.__name__.startswith("Async"):  # a follow is an async iterator instead
                assert inspect.iscoroutinefunction(method) != bool(spec.options.pushes)


def test_a_new_declaration_appears_in_stub_and_server_alike():
    class DemoApi(Api):
        @rpc()
        def add(self, a: int, b: int = 2) -> int:
            """Add two numbers."""

    from client.stubs import SyncStub

    class DemoClient(SyncStub, api=DemoApi):
        _daemon = "demo"

    class Impl:
        async def add(self, conn: object, a: int, b: int) -> int:
            return a + b

    assert set(build_methods(DemoApi, Impl())) == {"add"}
    assert DemoClient.add.__doc__ == "Add two numbers."
    spec = DemoApi.methods()["add"]
    assert spec.param_names == ("a", "b")
    assert spec.required == {"a"}
    assert spec.encode_params((1,), {}) == {"a": 1}
    assert msgspec.structs.asdict(spec.decode_params([], {"a": 1})) == {"a": 1, "b": 2}


def test_implementation_must_match_the_declaration():
    class DemoApi(Api):
        @rpc()
        def add(self, a: int, b: int) -> int:
            """Add."""

    class WrongNames:
        async def add(self, conn: object, x: int, y: int) -> int:
            return x + y

    class Missing:
        pass

    class Right:
        async def add(self, conn: object, a: int, b: int) -> int:
            return a + b

    with pytest.raises(TypeError, match="declares"):
        build_methods(DemoApi, WrongNames())
    with pytest.raises(TypeError, match="must implement"):
        build_methods(DemoApi, Missing())
    # several implementation objects: each method on exactly one of them
    assert set(build_methods(DemoApi, Missing(), Right())) == {"add"}
    with pytest.raises(TypeError, match="several objects"):
        build_methods(DemoApi, Right(), Right())


def test_param_errors_name_the_param():
    spec = WConfdApi.methods()["identify"]
    with pytest.raises(errors.InvalidParams, match="`pid`"):
        spec.decode_params([], {"job_id": 1, "pid": "x", "start_time": 1.0})
    with pytest.raises(errors.InvalidParams, match="pid"):
        spec.decode_params([], {"job_id": 1, "start_time": 1.0})
    with pytest.raises(errors.InvalidParams, match="bogus"):
        spec.decode_params([], {"job_id": 1, "pid": 1, "start_time": 1.0, "bogus": 1})
    with pytest.raises(errors.InvalidParams, match="at most 4"):
        spec.decode_params([1, 2, 3, 4, 5], {})


def test_stub_rejects_bad_call_shapes_before_sending():
    client = WConfdClient("/nonexistent.sock")
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.identify(job_id=1, pid=1, start_time=1.0, nope=2)
    with pytest.raises(TypeError, match="missing required"):
        client.identify(job_id=1)


def test_error_classes_follow_the_table():
    assert errors.LockOrderError.code == -32010
    assert (
        errors.from_wire(
            {"code": -32012, "message": "m", "data": {"type": "DeadlockError"}}
        ).__class__
        is errors.DeadlockError
    )
    unknown = errors.from_wire({"code": -32099 - 1, "message": "odd", "data": None})
    assert type(unknown) is errors.RpcError and unknown.code == -32100
    for cls in errors.WIRE_ERRORS:
        exc = cls("boom")
        assert exc.to_wire() == {
            "code": cls.code,
            "message": "boom",
            "data": {"type": cls.__name__},
        }
        assert issubclass(cls, errors.RpcError)
    assert issubclass(errors.ConnectionError, errors.RpcError)
    assert len({cls.code for cls in errors.WIRE_ERRORS}) == len(errors.WIRE_ERRORS) == 23


def test_what_a_stub_may_send_again_is_declared_once_and_is_idempotent():
    """Reads, lock waits, the state-setting lock and reservation calls and job
    reports are re-sent across a restart; nothing that steps a state (submit, cancel,
    add, reserve, generate_mac, ...) is."""
    reads = {
        "ping", "version", "list_locks", "list_all_locks", "list_clients", "get_config",
        "get_object", "list_objects", "get_node_rooms", "wait_config_change", "list_reservations",
        "query_jobs", "wait_for_job_change", "query_queue_info", "query_filters",
        "get_metrics", "query_drains", "wait_for_drain_change", "get_role", "list_roles",
        "wait_queue_change", "wait_locks_change", "query_queue_overview", "lock_waits", "why_job",
        "query_budgets", "plan_node_drain", "query_audit",
        "watch_events",
    }  # fmt: skip
    idempotent = {
        "update_locks_waiting", "try_update_locks", "free_locks", "free_locks_level",
        "intersect_locks", "downgrade_locks_level", "release_reservations",
        "release_reservation", "job_report",
    }  # fmt: skip
    declared = {
        name
        for api in (WConfdApi, LuxiApi)
        for name, spec in api.methods().items()
        if spec.options.reissue
    }
    assert declared == reads | idempotent
    # An audited call sent twice would leave two entries: none is re-sent.
    assert not {
        n for api in (WConfdApi, LuxiApi) for n, s in api.methods().items() if s.audited
    } & (declared)


_CHECKED: list[object] = []


def _even(value: int) -> None:
    _CHECKED.append(value)
    if value % 2:
        raise errors.InvalidParams("n must be even")


class _CheckedApi(Api):
    @rpc()
    def m(self, n: Annotated[int, Check(_even)]) -> None:
        """A method with a checked param."""


def test_a_check_annotation_runs_after_the_type_check():
    spec = _CheckedApi.methods()["m"]
    assert spec.decode_params([], {"n": 2}).n == 2
    with pytest.raises(errors.InvalidParams, match="even"):
        spec.decode_params([4 + 1], {})
    with pytest.raises(errors.InvalidParams, match="`n`"):
        spec.decode_params([], {"n": "x"})  # the type check comes first: _even never sees it
    assert _CHECKED == [2, 5]
