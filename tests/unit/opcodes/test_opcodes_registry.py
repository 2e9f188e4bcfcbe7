"""The registry: registration, entry-point plugins (lazy, cached, fault-tolerant), cheapness."""

from __future__ import annotations

import importlib.metadata
import logging
import subprocess
import sys
import textwrap
import types
from typing import Any

import pytest

from client.errors import InvalidOpcode
from jobproc.opcodes import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    LockPlan,
    OpCode,
    OpcodeRegistry,
    OpParams,
    build_opcode,
    get_opcode_class,
    known_op_ids,
)
from jobproc.opcodes.builtin import BUILTIN_OPCODES, TestDelay


class FooParams(OpParams):
    size: int


class Foo(OpCode[FooParams]):
    """A plugin opcode."""

    OP_ID = "OP_FOO"
    Params = FooParams
    SUMMARY_FIELD = "size"

    def locks(self, params: FooParams, config: Any) -> LockPlan:
        return LockPlan.single()

    def execute(self, ctx: Any) -> int:
        return self.params.size * 2


class BarParams(OpParams):
    pass


class Bar(OpCode[BarParams]):
    OP_ID = "OP_BAR"
    Params = BarParams


class Shadow(OpCode[BarParams]):
    """Tries to replace a built-in."""

    OP_ID = "OP_TEST_DELAY"
    Params = BarParams


class LooseParams(OpParams, forbid_unknown_fields=False):
    x: int = 0


class Loose(OpCode[LooseParams]):
    OP_ID = "OP_LOOSE"
    Params = LooseParams


PLUGIN_MODULE = types.ModuleType("fake_lw_plugin")
PLUGIN_MODULE.Foo = Foo  # type: ignore[attr-defined]
PLUGIN_MODULE.Bar = Bar  # type: ignore[attr-defined]
PLUGIN_MODULE.Shadow = Shadow  # type: ignore[attr-defined]
PLUGIN_MODULE.Loose = Loose  # type: ignore[attr-defined]
PLUGIN_MODULE.both = (Foo, Bar)  # type: ignore[attr-defined]
PLUGIN_MODULE.not_an_opcode = 42  # type: ignore[attr-defined]


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, spec: dict[str, str]) -> list[str]:
    """Make importlib.metadata.entry_points return `spec` (name -> value); count calls."""
    monkeypatch.setitem(sys.modules, "fake_lw_plugin", PLUGIN_MODULE)
    calls: list[str] = []
    eps = importlib.metadata.EntryPoints(
        importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)
        for name, value in spec.items()
    )

    def entry_points(**kwargs: Any) -> importlib.metadata.EntryPoints:
        calls.append(kwargs["group"])
        return eps.select(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return calls


def test_default_registry_holds_the_builtins() -> None:
    assert set(known_op_ids()) >= {c.OP_ID for c in BUILTIN_OPCODES}
    assert get_opcode_class("OP_TEST_DELAY") is TestDelay
    with pytest.raises(InvalidOpcode, match="unknown OP_ID 'OP_X'"):
        get_opcode_class("OP_X")
    op = build_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 2})
    assert isinstance(op, TestDelay) and op.params.duration == 2.0


def test_plugin_is_loaded_lazily_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_entry_points(monkeypatch, {"OP_FOO": "fake_lw_plugin:Foo"})
    reg = OpcodeRegistry()
    assert reg.validate({"OP_ID": "OP_TEST_DELAY", "duration": 1})[0] == "OP_TEST_DELAY"
    assert calls == []  # built-ins never look at plugins
    op_id, params = reg.validate({"OP_ID": "OP_FOO", "size": 3, "priority": 5})
    assert (op_id, params.priority) == ("OP_FOO", 5)
    assert reg.build({"OP_ID": "OP_FOO", "size": 3}).execute(None) == 6
    reg.validate({"OP_ID": "OP_FOO", "size": 4})
    with pytest.raises(InvalidOpcode):
        reg.validate({"OP_ID": "OP_NOPE"})
    assert "OP_FOO" in reg.known_op_ids()
    assert calls == [ENTRY_POINT_GROUP]  # discovered once
    with pytest.raises(InvalidOpcode, match="OP_FOO: unknown parameter 'colour'"):
        reg.validate({"OP_ID": "OP_FOO", "size": 1, "colour": "red"})
    assert reg.summary({"OP_ID": "OP_FOO", "size": 3}) == "FOO(3)"
    reg.reload_plugins()
    assert reg.get("OP_FOO") is Foo and calls == [ENTRY_POINT_GROUP] * 2


def test_entry_point_may_name_several_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_entry_points(monkeypatch, {"mine": "fake_lw_plugin:both"})
    reg = OpcodeRegistry()
    assert reg.get("OP_BAR") is Bar and reg.get("OP_FOO") is Foo


def test_broken_plugins_are_logged_and_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_entry_points(
        monkeypatch,
        {
            "OP_A_MISSING": "no_such_module_xyz:Op",
            "OP_B_NOT": "fake_lw_plugin:not_an_opcode",
            "OP_C_SHADOW": "fake_lw_plugin:Shadow",
            "OP_D_LOOSE": "fake_lw_plugin:Loose",
            "OP_FOO": "fake_lw_plugin:Foo",
        },
    )
    reg = OpcodeRegistry()
    with caplog.at_level(logging.ERROR, logger="jobproc.opcodes.registry"):
        known = reg.known_op_ids()
    assert "OP_FOO" in known and "OP_LOOSE" not in known
    assert reg.get("OP_TEST_DELAY") is TestDelay  # not shadowed
    errors = reg.plugin_errors()
    assert set(errors) == {
        "OP_A_MISSING = no_such_module_xyz:Op",
        "OP_B_NOT = fake_lw_plugin:not_an_opcode",
        "OP_C_SHADOW = fake_lw_plugin:Shadow",
        "OP_D_LOOSE = fake_lw_plugin:Loose",
    }
    assert "ModuleNotFoundError" in errors["OP_A_MISSING = no_such_module_xyz:Op"]
    assert "forbid unknown fields" in errors["OP_D_LOOSE = fake_lw_plugin:Loose"]
    assert len([r for r in caplog.records if "skipping opcode plugin" in r.message]) == 4


def test_failing_entry_points_listing_is_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("bad metadata")

    monkeypatch.setattr(importlib.metadata, "entry_points", broken)
    reg = OpcodeRegistry()
    assert reg.get("OP_FOO") is None
    assert "OP_TEST_DELAY" in reg.known_op_ids()


def test_register_and_refuse_bad_classes() -> None:
    reg = OpcodeRegistry(builtins=False, group=None)
    assert reg.known_op_ids() == []
    assert reg.register(Foo) is Foo
    assert reg.register(Foo) is Foo  # idempotent
    with pytest.raises(ValueError, match="already registered"):
        reg.register(type("Foo2", (Foo,), {}))
    with pytest.raises(TypeError):
        reg.register(int)
    with pytest.raises(ValueError, match="OP_ID"):
        reg.register(type("Lower", (Foo,), {"OP_ID": "op_lower"}))
    with pytest.raises(ValueError, match="forbid unknown fields"):
        reg.register(Loose)
    with pytest.raises(TypeError, match="Params"):
        reg.register(type("NoParams", (OpCode,), {"OP_ID": "OP_NO_PARAMS"}))
    assert reg.known_op_ids() == ["OP_FOO"]


def test_summaries_follow_ganeti() -> None:
    assert REGISTRY.summary({"OP_ID": "OP_TEST_DELAY", "duration": 2}) == "TEST_DELAY(2.0)"
    assert REGISTRY.summary({"OP_ID": "OP_NODE_ADD", "node_name": "n9"}) == "NODE_ADD(n9)"
    assert REGISTRY.summary({"OP_ID": "OP_CLUSTER_VERIFY"}) == "CLUSTER_VERIFY"


def test_registry_import_is_cheap() -> None:
    """luxid imports the registry: no daemon, no built-in opcode module, no plugin scan."""
    code = textwrap.dedent("""
        import sys
        import jobproc.opcodes.registry as r
        heavy = [m for m in sys.modules if m.split(".")[0] in ("wconfd", "luxid", "rapi")
                 or m.startswith("jobproc.opcodes.builtin") or m == "importlib.metadata"
                 or m in ("jobproc.main", "jobproc.__main__", "jobproc.locks.strategy",
                           "jobproc.locks.acquire", "jobproc.runner", "jobproc.zygote")]
        assert not heavy, heavy
        r.validate_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 1})
        assert "importlib.metadata" not in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
