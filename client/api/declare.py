"""Declaring an RPC API once: name, typed parameters, result and errors.

An API is a class whose methods carry the `@rpc` decorator and have no body but a
docstring.  From it come, without a second list of methods anywhere:

- the server's dispatch table (`client._server.dispatch`), which checks that the daemon
  implements every declared method with the declared parameter names and decodes params
  with a msgspec Struct derived from the signature;
- the sync and asyncio client stubs (`client.stubs`), which take the same parameters and
  decode results with the declared result type.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from client.api.numbers import check_numbers
from client.errors import InvalidParams, PermissionDenied, RpcError

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__lw_rpc__"
ACTOR_PARAM = "actor"
"""The last param of every audited method: whom the caller acts for."""

# What an audited method's entry names (docs/contracts.md#audit-log): a fixed target
# ("queue"), or one made from the decoded params; the daemon may name it more exactly.
AuditTarget = str | Callable[[Any], str]


def target(prefix: str, param: str) -> Callable[[Any], str]:
    """An audit target `<prefix>/<value of param>` (e.g. `job/42` from `job_id`)."""

    def name(params: Any) -> str:
        return f"{prefix}/{getattr(params, param)}"

    return name


@dataclass(frozen=True)
class RpcOptions:
    """What `@rpc` records about a method besides its signature."""

    errors: tuple[type[RpcError], ...]
    identified: bool
    reissue: bool
    daemons_only: bool | str = False
    audit: AuditTarget | None = None
    pushes: str | None = None


def rpc(
    *errors: type[RpcError],
    identified: bool = True,
    reissue: bool = False,
    daemons_only: bool | str = False,
    audit: AuditTarget | None = None,
    pushes: str | None = None,
) -> Callable[[F], F]:
    """Declare an RPC method.

    `errors` lists the typed errors it may raise (besides the protocol ones).
    `identified=False` lets it run before `identify` (wconfd).  `daemons_only=True`
    accepts it only from a peer whose uid is the daemon's own or 0
    (docs/contracts.md#who-may-call); the name of a param instead (`"job_id"`) does so
    only when the call gives that param a value other than null.  Such a method declares
    PermissionDenied among its errors by that alone.  `reissue=True` lets a
    stub send it again when the connection broke while waiting for the answer, e.g. across
    a daemon restart.  Declare it only where sending twice ends as sending once:
    reads; requests withdrawn when the connection closes (a lock wait); calls that set a
    state rather than step it (acquire these pairs, free, intersect, downgrade, release a
    reservation: applied again against the restored table they change nothing more); and
    job reports, which luxid deduplicates by opcode index and log sequence.
    `audit` records every call in the daemon's audit log (docs/contracts.md#audit-log)
    under that target; such a method's last param must be `actor: Actor | None = None`.
    `pushes` names the notification the daemon goes on sending on the connection after
    the answer (its params: the declared result type), until the connection closes
    (docs/contracts.md#wire-protocol); the stubs call such a method on a connection of
    its own and hand back an iterator of the answer and each notification.
    """

    declared = tuple(errors)
    if daemons_only and PermissionDenied not in declared:
        declared = (PermissionDenied, *declared)

    def mark(func: F) -> F:
        setattr(func, _MARK, RpcOptions(declared, identified, reissue, daemons_only, audit, pushes))
        return func

    return mark


@dataclass(frozen=True)
class Check:
    """`Annotated` metadata for a param: a check its value must pass beyond its type.

    `func` gets the decoded value and raises a typed error (e.g. InvalidOpcode) naming what
    is wrong; it runs at the edge, after the type and range checks, before the method.
    """

    func: Callable[[Any], None]


@dataclass(frozen=True)
class MethodSpec:
    """One declared method, ready for the server and the stubs."""

    name: str
    doc: str
    param_names: tuple[str, ...]
    required: frozenset[str]
    defaults: dict[str, Any]
    params: type[msgspec.Struct]
    result_type: Any
    options: RpcOptions
    checks: tuple[tuple[str, Callable[[Any], None]], ...] = ()

    @property
    def audited(self) -> bool:
        """Whether each call is recorded in the audit log."""
        return self.options.audit is not None

    def audit_target(self, params: Any) -> str:
        """The target an entry of this call names unless the daemon says otherwise."""
        rule = self.options.audit
        if rule is None:
            return ""
        return rule if isinstance(rule, str) else rule(params)

    def decode_params(self, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Turn JSON params (by position or by name) into the params Struct.

        Raises InvalidParams naming the parameter that is missing, unknown, ill-typed, out
        of its declared range, or holding a number beyond signed 64 bits or not finite.
        """
        if args:
            if kwargs:
                raise InvalidParams(f"{self.name}: params must be all by name or all by position")
            if len(args) > len(self.param_names):
                raise InvalidParams(
                    f"{self.name}: takes at most {len(self.param_names)} params "
                    f"({', '.join(self.param_names) or 'none'}), got {len(args)}"
                )
            kwargs = dict(zip(self.param_names, args, strict=False))
        check_numbers(self.name, kwargs)
        try:
            params = msgspec.convert(kwargs, self.params, strict=True)
        except msgspec.ValidationError as exc:
            text, param = _name_the_param(str(exc))
            raise InvalidParams(
                f"{self.name}: {text}", {"param": param} if param else None
            ) from None
        for name, check in self.checks:
            check(getattr(params, name))
        return params

    def restricted(self, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this call (its params as they came, not yet decoded) falls under the
        daemons-only rule: always for `daemons_only=True`, for a param name when the call
        gives that param a value other than null (by name or by position)."""
        rule = self.options.daemons_only
        if not isinstance(rule, str):
            return rule
        if kwargs:
            return kwargs.get(rule) is not None
        index = self.param_names.index(rule)
        return len(args) > index and args[index] is not None

    def encode_params(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Bind a stub call's arguments to parameter names (only the ones given)."""
        if len(args) > len(self.param_names):
            raise TypeError(f"{self.name}() takes at most {len(self.param_names)} arguments")
        bound = dict(zip(self.param_names, args, strict=False))
        for key, value in kwargs.items():
            if key not in self.param_names:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}")
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            bound[key] = value
        missing = self.required - bound.keys()
        if missing:
            raise TypeError(f"{self.name}() missing required arguments: {sorted(missing)}")
        return bound


def _name_the_param(message: str) -> tuple[str, str | None]:
    """Rewrite msgspec's "… - at `$.pid`" as "param `pid`: …" (the contract names the param).

    Returns the message and the top-level param's name when msgspec says which it is.
    """
    text, sep, where = message.rpartition(" - at `$.")
    if sep:
        path = where.rstrip("`")
        return f"param `{path}`: {text}", re.split(r"[.\[]", path, maxsplit=1)[0]
    for prefix, said in (
        ("Object missing required field", "missing required param"),
        ("Object contains unknown field", "unknown param"),
    ):
        if message.startswith(prefix):
            return message.replace(prefix, said), message[len(prefix) :].strip(" `")
    return message, None


def _spec_of(name: str, func: Callable[..., Any], options: RpcOptions) -> MethodSpec:
    hints = typing.get_type_hints(func, include_extras=True)
    signature = inspect.signature(func)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    checks: list[tuple[str, Callable[[Any], None]]] = []
    required: set[str] = set()
    defaults: dict[str, Any] = {}
    names: list[str] = []
    for pname, param in list(signature.parameters.items())[1:]:  # skip self
        annotation = hints.get(pname, Any)
        names.append(pname)
        metadata = getattr(annotation, "__metadata__", ())
        checks += [(pname, m.func) for m in metadata if isinstance(m, Check)]
        if param.default is inspect.Parameter.empty:
            fields.append((pname, annotation))
            required.add(pname)
        else:
            fields.append((pname, annotation, param.default))
            defaults[pname] = param.default
    rule = options.daemons_only
    if isinstance(rule, str) and rule not in names:
        raise TypeError(f"{name}: daemons_only names {rule!r}, which is not one of its params")
    if options.audit is not None and (not names or names[-1] != ACTOR_PARAM):
        raise TypeError(f"{name}: an audited method's last param must be `{ACTOR_PARAM}`")
    params = msgspec.defstruct(f"{name}_params", fields, forbid_unknown_fields=True, kw_only=True)
    return MethodSpec(
        name=name,
        doc=inspect.getdoc(func) or "",
        param_names=tuple(names),
        required=frozenset(required),
        defaults=defaults,
        params=params,
        result_type=hints.get("return", Any),
        options=options,
        checks=tuple(checks),
    )


class Api:
    """Base of API declarations; `methods()` lists the declared methods by name."""

    _specs: dict[str, MethodSpec] | None = None

    @classmethod
    def methods(cls) -> dict[str, MethodSpec]:
        """Every `@rpc` method of this API and its bases, derived once and cached."""
        cached = cls.__dict__.get("_specs")
        if cached is None:
            cached = {}
            for klass in reversed(cls.__mro__):
                for name, func in vars(klass).items():
                    options = getattr(func, _MARK, None)
                    if options is not None:
                        cached[name] = _spec_of(name, func, options)
            cls._specs = cached
        return cached
