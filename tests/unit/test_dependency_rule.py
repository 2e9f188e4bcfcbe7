"""The dependency rule between Lockwarden's packages, and no import cycles among its modules.

Every product module (client, wconfd, luxid, jobproc, rapi) is parsed with `ast`, never
imported, and its runtime imports are collected: module-level ones and those inside
functions (a lazy import is still a dependency, and still closes a circle), but not those
under ``if TYPE_CHECKING:``, which never run.  The rule itself is docs/architecture.md's:

- client (the public package and the daemons' internal toolkit `client._server`) imports
  no daemon package;
- public client modules (client/ outside client/_server) never import `client._server`;
- the daemons never import one another, except that luxid imports jobproc's opcode
  registry (to validate opcodes at submit time) and nothing else of jobproc;
- rapi imports only client (client._server included, for its daemon plumbing);
- a pure core (`PURE`) imports no I/O module (`IO_MODULES`), nothing of `client._server`,
  and no module of its own daemon that is not pure; nor may an I/O module be reached by
  following its imports through product modules (a package's __init__ runs too);
- the import graph has no cycles.

A failure names the rule, the importing module, the import and its line; a cycle is
reported as a path of modules, each step with the import that makes it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("client", "wconfd", "luxid", "jobproc", "rapi")
DAEMONS = ("wconfd", "luxid", "jobproc", "rapi")
SERVER = "client._server"

# What each daemon package may import of the other product packages (besides its own).
# An entry is a package (everything under it) or a single module.
ALLOWED_FOREIGN: dict[str, tuple[str, ...]] = {
    "wconfd": ("client",),
    "luxid": ("client", "jobproc.opcodes.registry"),
    "jobproc": ("client",),
    "rapi": ("client",),
}

# The pure cores: code that decides, and leaves sockets, files, clocks, processes and
# threads to the daemon shell that calls it.  An entry is a package (every module under it)
# or a single module.  Modules under a pure package that do I/O are listed in IMPURE.
PURE: tuple[str, ...] = (
    "wconfd.locking",
    "wconfd.config",
    "wconfd.durable_state",
    "luxid.jobs",
    "luxid.filters",
    "luxid.drains",
    "luxid.takeover",
    "jobproc.locks",
    "client.filterrules",
    "client.events",
    "luxid.events",
)
# Modules inside a PURE package that are shells (they do I/O on the core's behalf).
IMPURE: tuple[str, ...] = ("jobproc.locks.acquire",)

# Standard-library and third-party modules that do I/O, read clocks, or run processes or
# threads; a pure core imports none of them (nor a submodule of one).
IO_MODULES = frozenset(
    {
        "aiohttp",
        "asyncio",
        "concurrent",
        "fcntl",
        "http",
        "io",
        "logging",
        "mmap",
        "multiprocessing",
        "os",
        "pathlib",
        "prometheus_client",
        "psutil",
        "queue",
        "select",
        "selectors",
        "shutil",
        "signal",
        "socket",
        "socketserver",
        "sqlite3",
        "ssl",
        "subprocess",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "uvloop",
    }
)


@dataclass(frozen=True)
class Import:
    """One runtime import of a module: what it names, where, and whether it is lazy."""

    target: str  # the module imported (a product module when it is one)
    line: int
    lazy: bool  # inside a function

    def where(self, module: str) -> str:
        kind = "function-level import" if self.lazy else "import"
        return f"{module}:{self.line} ({kind} of {self.target})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _product_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            files[_module_name(path)] = path
    return files


FILES = _product_files()
MODULES = frozenset(FILES)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The import statements under `node` that run, with whether each is in a function."""
    for child in ast.iter_child_nodes(node):
        yield from _walk_statement(child, lazy)


def _walk_statement(
    node: ast.AST, lazy: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, lazy
    elif isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.orelse:  # the `else:` of `if TYPE_CHECKING:` does run
            yield from _walk_statement(statement, lazy)
    else:
        in_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(node, lazy or in_function)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of what `from ... import` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_in(
    source: str, module: str, *, is_package: bool = False, modules: frozenset[str] = frozenset()
) -> list[Import]:
    """The runtime imports of `module`, given its source and the product modules that exist
    (`from pkg import name` imports the module pkg.name when there is one)."""
    found: list[Import] = []
    for node, lazy in _walk(ast.parse(source, module), lazy=False):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno, lazy) for alias in node.names]
            continue
        base = _resolve(module, is_package, node)
        if base == "__future__":
            continue
        targets: list[str] = []
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            target = sub if sub in modules else base
            if target not in targets:
                targets.append(target)
        found += [Import(target, node.lineno, lazy) for target in targets]
    return found


def _imports_of(module: str) -> list[Import]:
    path = FILES[module]
    source = path.read_text(encoding="utf-8")
    return imports_in(source, module, is_package=path.name == "__init__.py", modules=MODULES)


IMPORTS: dict[str, list[Import]] = {module: _imports_of(module) for module in sorted(FILES)}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _under_any(module: str, prefixes: Iterable[str]) -> bool:
    return any(_under(module, prefix) for prefix in prefixes)


def _top(module: str) -> str:
    return module.partition(".")[0]


def _is_pure(module: str) -> bool:
    return _under_any(module, PURE) and not _under_any(module, IMPURE)


def _product_imports(module: str) -> Iterator[Import]:
    return (i for i in IMPORTS[module] if _top(i.target) in PRODUCT)


def _report(rule: str, problems: list[str]) -> None:
    assert not problems, f"{rule}:\n  " + "\n  ".join(problems)


# -- the analysis itself ------------------------------------------------------------------


def test_every_product_package_is_seen() -> None:
    # A guard against a test that passes because it parsed nothing.
    for package in PRODUCT:
        assert package in MODULES, f"no {package}/__init__.py under {ROOT}"
    assert len(MODULES) > 150


def test_pure_entries_exist() -> None:
    # A renamed pure package must be renamed here too, or its purity stops being checked.
    for entry in (*PURE, *IMPURE):
        assert entry in MODULES, (
            f"PURE/IMPURE names {entry}, which is no module or package any more: "
            "update the list in tests/unit/test_dependency_rule.py"
        )


def test_imports_are_read_as_python_runs_them() -> None:
    source = """
from __future__ import annotations
import os.path, json
from typing import TYPE_CHECKING
from . import sibling, helper
from .. import errors
from .sub import thing

if TYPE_CHECKING:
    import socket
    from pkg import typed_only
else:
    import runtime_else

class Holder:
    import at_class_level

def later():
    import lazy_one
    def inner():
        from pkg.mod import lazy_two
"""
    modules = frozenset({"pkg", "pkg.mod", "pkg.mod.sibling", "pkg.errors"})
    found = {(imp.target, imp.lazy) for imp in imports_in(source, "pkg.mod.here", modules=modules)}
    assert found == {
        ("os.path", False),
        ("json", False),
        ("typing", False),
        ("pkg.mod.sibling", False),  # a module of the package
        ("pkg.mod", False),  # `helper` is a name in pkg.mod, not a module
        ("pkg.errors", False),
        ("pkg.mod.sub", False),
        ("runtime_else", False),
        ("at_class_level", False),
        ("lazy_one", True),
        ("pkg.mod", True),
    }
    in_package = imports_in("from . import x", "pkg.mod", is_package=True, modules=modules)
    assert [imp.target for imp in in_package] == ["pkg.mod"]


def test_cycles_are_found_and_reported_as_paths() -> None:
    def edge(target: str) -> Import:
        return Import(target, 1, lazy=False)

    graph = {
        "a": {"b": edge("b")},
        "b": {"c": edge("c")},
        "c": {"a": edge("a"), "d": edge("d")},
        "d": {},
        "x": {"y": edge("y")},
        "y": {"x": edge("x")},
    }
    assert _cycles(graph) == [["a", "b", "c", "a"], ["x", "y", "x"]]
    assert _cycles({"a": {"b": edge("b")}, "b": {}}) == []


# -- the rule -------------------------------------------------------------------------------


def test_client_imports_no_daemon() -> None:
    problems = [
        f"{imp.where(module)}: client must not depend on daemon package {_top(imp.target)}"
        for module in MODULES
        if _top(module) == "client"
        for imp in _product_imports(module)
        if _top(imp.target) in DAEMONS
    ]
    _report("rule 'client imports no daemon package' broken", sorted(problems))


def test_public_client_does_not_import_server_toolkit() -> None:
    problems = [
        f"{imp.where(module)}: public client code must not import the daemons' "
        f"internal toolkit {SERVER}"
        for module in MODULES
        if _top(module) == "client" and not _under(module, SERVER)
        for imp in _product_imports(module)
        if _under(imp.target, SERVER)
    ]
    _report(f"rule 'public client never imports {SERVER}' broken", sorted(problems))


def test_daemons_do_not_import_one_another() -> None:
    problems = []
    for module in MODULES:
        package = _top(module)
        if package not in DAEMONS:
            continue
        allowed = ALLOWED_FOREIGN[package]
        for imp in _product_imports(module):
            if _top(imp.target) == package or _under_any(imp.target, allowed):
                continue
            problems.append(
                f"{imp.where(module)}: {package} may import only itself and {', '.join(allowed)}"
            )
    _report(
        "rule 'daemons import client, not one another (luxid: jobproc's opcode registry "
        "only; rapi: client only)' broken",
        sorted(problems),
    )


def test_pure_cores_import_no_io_and_no_shell() -> None:
    problems = []
    for module in sorted(MODULES):
        if not _is_pure(module):
            continue
        for imp in IMPORTS[module]:
            if _top(imp.target) in IO_MODULES:
                problems.append(f"{imp.where(module)}: {_top(imp.target)} is an I/O module")
            elif _under(imp.target, SERVER):
                problems.append(f"{imp.where(module)}: {SERVER} is the daemons' shell toolkit")
            elif (
                _top(module) in DAEMONS
                and _top(imp.target) == _top(module)
                and not _is_pure(imp.target)
            ):
                problems.append(
                    f"{imp.where(module)}: {imp.target} is not one of {_top(module)}'s pure "
                    "cores (list it in PURE if it is one)"
                )
    _report("rule 'pure cores import no I/O module and no shell module' broken", problems)


def test_pure_cores_reach_no_io_through_other_modules() -> None:
    # What a pure core imports of client (errors, vocabulary, ...) must not bring I/O in
    # either: follow its product imports and report the first path to an I/O module.
    problems = []
    for module in sorted(MODULES):
        if not _is_pure(module):
            continue
        path = _path_to_io(module)
        if path is not None:
            problems.append(f"{module} reaches I/O: {' -> '.join(path)}")
    _report("rule 'pure cores reach no I/O module' broken", problems)


def _executed(target: str) -> list[str]:
    """The product modules an import of `target` runs: its packages' and its own."""
    parts = target.split(".")
    names = [".".join(parts[: i + 1]) for i in range(len(parts))]
    return [name for name in names if name in MODULES]


def _path_to_io(start: str) -> list[str] | None:
    """A shortest import path from `start` to an I/O module, through product modules."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imp in IMPORTS[module]:
                if _top(imp.target) in IO_MODULES:
                    path = [f"{imp.target} (line {imp.line})"]
                    at: str | None = module
                    while at is not None:
                        path.append(at)
                        at = previous[at]
                    return path[::-1]
                for ran in _executed(imp.target):
                    if ran not in previous:
                        previous[ran] = module
                        following.append(ran)
        frontier = following
    return None


# -- cycles ---------------------------------------------------------------------------------


def _graph() -> dict[str, dict[str, Import]]:
    graph: dict[str, dict[str, Import]] = {}
    for module in MODULES:
        edges: dict[str, Import] = {}
        for imp in IMPORTS[module]:
            if imp.target in MODULES and imp.target != module:
                edges.setdefault(imp.target, imp)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module."""
    return [_cycle_in(graph, set(component)) for component in _components(graph)]


def _components(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:  # iterative Tarjan: the graph may be deep
        nonlocal counter
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(components)


def _cycle_in(graph: dict[str, dict[str, Import]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside it."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for child in sorted(graph[module]):
                if child not in component:
                    continue
                if child == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*path[::-1], start]
                if child not in previous:
                    previous[child] = module
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its component")  # pragma: no cover


def _describe(graph: dict[str, dict[str, Import]], component: list[str]) -> str:
    cycle = _cycle_in(graph, set(component))
    steps = [graph[a][b].where(a) for a, b in itertools.pairwise(cycle)]
    text = " -> ".join(cycle) + "\n      " + "\n      ".join(steps)
    if len(component) > len(cycle) - 1:
        text += "\n      (more circles run through: " + ", ".join(component) + ")"
    return text


def test_no_import_cycles() -> None:
    graph = _graph()
    problems = [_describe(graph, component) for component in _components(graph)]
    _report("rule 'no import cycles' broken (each cycle as a path, then its imports)", problems)
