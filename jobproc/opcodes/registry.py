"""The opcode registry: OP_ID → opcode class, and submit-time validation
(docs/contracts.md#job-methods).

This is the one module luxid may import from jobproc (docs/architecture.md#dependency-rule),
so it is cheap: msgspec, the standard library and `client.errors`.  The built-in opcodes are
imported on the first lookup; third-party opcodes (entry-point group ``lockwarden.opcodes``)
are discovered on the first lookup the built-ins cannot answer, or on `known_op_ids()`, and
cached.

Plugin contract: an entry point in ``lockwarden.opcodes`` whose object is an `OpCode`
subclass (or a list/tuple of them), e.g. ``OP_FOO = "mypkg.ops:Foo"``.  The entry point's
name is free (use the OP_ID).  A plugin that fails to import, is not an OpCode, has a bad
OP_ID, reuses a built-in's or another plugin's OP_ID, or whose Params allow unknown fields
is logged and skipped; it never makes the registry fail.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from client.errors import InvalidOpcode
from client.names import HOST_NAME_RULE, TAG_RULE
from jobproc.opcodes.base import (
    MAC_PREFIX_PATTERN,
    NAME_PATTERN,
    TAG_PATTERN,
    OpCode,
    OpParams,
)

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lockwarden.opcodes"
OP_ID_PATTERN = re.compile(r"^OP_[A-Z0-9_]+$")

OpCodeClass = type[OpCode[Any]]

# Friendlier words for the regexes of the built-in parameter types.
_PATTERN_HINTS = {
    NAME_PATTERN: HOST_NAME_RULE,
    TAG_PATTERN: f"a tag of {TAG_RULE}",
    MAC_PREFIX_PATTERN: "a MAC prefix like 'aa:00:00'",
}
_AT_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_FIELD = re.compile(r"field `(?P<name>[^`]+)`")
_REGEX = re.compile(r"matching regex '(?P<re>.*)'")


def _check_class(cls: Any) -> OpCodeClass:
    """`cls` if it is a usable opcode class; TypeError/ValueError saying why not."""
    if not (isinstance(cls, type) and issubclass(cls, OpCode)):
        raise TypeError(f"{cls!r} is not an OpCode subclass")
    op_id = getattr(cls, "OP_ID", None)
    if not isinstance(op_id, str) or not OP_ID_PATTERN.match(op_id):
        raise ValueError(f"{cls.__qualname__}: OP_ID {op_id!r} is not OP_[A-Z0-9_]+")
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, OpParams)):
        raise TypeError(f"{op_id}: Params must subclass jobproc.opcodes.base.OpParams")
    if not params.__struct_config__.forbid_unknown_fields:
        raise ValueError(f"{op_id}: Params must forbid unknown fields")
    return cls


_MISSING = object()


def _value_at(fields: Mapping[str, Any], path: str) -> Any:
    """The input value at a msgspec path like ``disks[0].size`` (or _MISSING)."""
    value: Any = fields
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            value = value[int(index)] if index else value[name]
        except (KeyError, IndexError, TypeError, ValueError):
            return _MISSING
    return value


def _describe(
    exc: msgspec.ValidationError, fields: Mapping[str, Any]
) -> tuple[str | None, str, bool]:
    """(top-level parameter, readable detail, whether the error is at the top level)."""
    text = str(exc)
    param: str | None = None
    path = ""
    at = _AT_PATH.search(text)
    if at:
        path = at.group("path").lstrip(".")
        text = text[: at.start()]
        param = re.split(r"[.\[]", path, maxsplit=1)[0] or None
    if param is None:
        field = _FIELD.search(text)
        param = field.group("name") if field else None
    regex = _REGEX.search(text)
    if regex:
        hint = _PATTERN_HINTS.get(regex.group("re").encode().decode("unicode_escape"))
        if hint:
            text = text[: regex.start()].replace("Expected `str`", f"Expected {hint}")
            text = text.rstrip()
    if path:
        value = _value_at(fields, path)
        if value is not _MISSING and " got " not in text and not text.startswith("Object"):
            shown = repr(value)
            text += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
        if path != param:
            text = f"{text} (at {path})"
    return param, text, not path


class OpcodeRegistry:
    """A set of opcode classes by OP_ID: the built-ins, plugins and explicit registrations."""

    def __init__(self, *, builtins: bool = True, group: str | None = ENTRY_POINT_GROUP) -> None:
        self._classes: dict[str, OpCodeClass] = {}
        self._builtin_ids: frozenset[str] = frozenset()
        self._want_builtins = builtins
        self._group = group
        self._plugins_loaded = group is None
        self._plugin_errors: dict[str, str] = {}
        self._lock = threading.RLock()

    # -- registration -------------------------------------------------------------------

    def register(self, cls: Any) -> OpCodeClass:
        """Add an opcode class; ValueError if its OP_ID is taken.  Usable as a decorator."""
        checked = _check_class(cls)
        with self._lock:
            self._ensure_builtins()
            existing = self._classes.get(checked.OP_ID)
            if existing is not None and existing is not checked:
                raise ValueError(f"{checked.OP_ID} is already registered by {existing!r}")
            self._classes[checked.OP_ID] = checked
        return checked

    def _ensure_builtins(self) -> None:
        if not self._want_builtins:
            return
        from jobproc.opcodes.builtin import BUILTIN_OPCODES

        for cls in BUILTIN_OPCODES:
            self._classes.setdefault(cls.OP_ID, _check_class(cls))
        self._builtin_ids = frozenset(c.OP_ID for c in BUILTIN_OPCODES)
        self._want_builtins = False

    def _ensure_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        assert self._group is not None
        from importlib.metadata import entry_points

        try:
            eps = sorted(entry_points(group=self._group), key=lambda e: (e.name, e.value))
        except Exception:  # a broken distribution's metadata must not break submits
            log.exception("cannot list entry points of group %s", self._group)
            return
        for ep in eps:
            label = f"{ep.name} = {ep.value}"
            try:
                obj = ep.load()
                classes = list(obj) if isinstance(obj, list | tuple) else [obj]
                checked = [_check_class(c) for c in classes]
            except Exception as exc:
                self._plugin_errors[label] = f"{type(exc).__name__}: {exc}"
                log.error("skipping opcode plugin %s: %s", label, exc, exc_info=True)
                continue
            for cls in checked:
                existing = self._classes.get(cls.OP_ID)
                if existing is not None and existing is not cls:
                    self._plugin_errors[label] = f"{cls.OP_ID} is already registered"
                    log.error(
                        "skipping opcode plugin %s: %s is already registered by %r",
                        label,
                        cls.OP_ID,
                        existing,
                    )
                    continue
                self._classes[cls.OP_ID] = cls

    def reload_plugins(self) -> None:
        """Forget the plugins and discover them again on the next lookup."""
        with self._lock:
            for op_id in [k for k in self._classes if k not in self._builtin_ids]:
                del self._classes[op_id]
            self._plugin_errors.clear()
            self._plugins_loaded = self._group is None

    # -- lookup -------------------------------------------------------------------------

    def get(self, op_id: str) -> OpCodeClass | None:
        """The class of `op_id`, or None; plugins are loaded only if needed."""
        with self._lock:
            self._ensure_builtins()
            cls = self._classes.get(op_id)
            if cls is None and not self._plugins_loaded:
                self._ensure_plugins()
                cls = self._classes.get(op_id)
            return cls

    def known_op_ids(self) -> list[str]:
        """Every usable OP_ID, sorted (loads the plugins)."""
        with self._lock:
            self._ensure_builtins()
            self._ensure_plugins()
            return sorted(self._classes)

    def plugin_errors(self) -> dict[str, str]:
        """Plugins skipped so far, ``"name = value"`` → why (for `lw` and logs)."""
        with self._lock:
            return dict(self._plugin_errors)

    def lookup(self, op_id: str) -> OpCodeClass:
        """The class of `op_id`; InvalidOpcode listing the known OP_IDs if there is none."""
        cls = self.get(op_id)
        if cls is None:
            known = ", ".join(self.known_op_ids())
            raise InvalidOpcode(
                f"unknown OP_ID {op_id!r}; known: {known}",
                {"op_id": op_id, "param": "OP_ID"},
            )
        return cls

    # -- validation ---------------------------------------------------------------------

    def validate(self, op: Any) -> tuple[str, OpParams]:
        """Check one opcode dict; returns (OP_ID, params Struct) or raises InvalidOpcode.

        The message names the OP_ID and the bad parameter; ``data`` carries them as
        ``op_id`` and ``param``.
        """
        if not isinstance(op, Mapping):
            raise InvalidOpcode(
                f"an opcode must be a JSON object, not {type(op).__name__}",
                {"op_id": None, "param": None},
            )
        op_id = op.get("OP_ID")
        if not isinstance(op_id, str):
            raise InvalidOpcode(
                "an opcode needs an OP_ID string", {"op_id": None, "param": "OP_ID"}
            )
        cls = self.lookup(op_id)
        fields = {k: v for k, v in op.items() if k != "OP_ID"}
        try:
            params = msgspec.convert(fields, cls.Params, strict=True)
        except msgspec.ValidationError as exc:
            param, detail, top = _describe(exc, fields)
            if param is None:
                message = f"{op_id}: invalid parameters: {detail}"
            elif top and detail.startswith("Object contains unknown field"):
                message = f"{op_id}: unknown parameter {param!r}"
            elif top and detail.startswith("Object missing required field"):
                message = f"{op_id}: missing required parameter {param!r}"
            else:
                message = f"{op_id}: invalid parameter {param!r}: {detail}"
            raise InvalidOpcode(message, {"op_id": op_id, "param": param}) from None
        return op_id, params

    def build(self, op: Any) -> OpCode[Any]:
        """Validate `op` and return the opcode object ready for ``locks`` and ``execute``."""
        op_id, params = self.validate(op)
        return self.lookup(op_id)(params)

    def summary(self, op: Any) -> str:
        """Ganeti-style summary of a valid opcode ("INSTANCE_CREATE(web1)")."""
        op_id, params = self.validate(op)
        return self.lookup(op_id).summary(params)


REGISTRY = OpcodeRegistry()
"""The process-wide registry: built-ins plus the installed plugins."""


def validate_opcode(op: Any) -> tuple[str, OpParams]:
    """Check one opcode dict against the process-wide registry (see `OpcodeRegistry.validate`)."""
    return REGISTRY.validate(op)


def build_opcode(op: Any) -> OpCode[Any]:
    """Validate `op` and instantiate its opcode class (for the job process)."""
    return REGISTRY.build(op)


def get_opcode_class(op_id: str) -> OpCodeClass:
    """The class registered for `op_id`; InvalidOpcode if none."""
    return REGISTRY.lookup(op_id)


def known_op_ids() -> list[str]:
    """All usable OP_IDs of the process-wide registry, sorted."""
    return REGISTRY.known_op_ids()


def register_opcode(cls: Any) -> OpCodeClass:
    """Register an opcode class in the process-wide registry (decorator-friendly)."""
    return REGISTRY.register(cls)


def validate_job(ops: Iterable[Any]) -> list[tuple[str, OpParams]]:
    """Validate every opcode of a job; InvalidOpcode names the opcode index too."""
    out: list[tuple[str, OpParams]] = []
    for index, op in enumerate(ops):
        try:
            out.append(validate_opcode(op))
        except InvalidOpcode as exc:
            data = {k: v for k, v in exc.data.items() if k != "type"}
            data["index"] = index
            raise InvalidOpcode(f"opcode {index}: {exc.message}", data) from None
    return out
