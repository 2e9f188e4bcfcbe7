"""jobproc's module layout: no import circle among its modules (counting imports inside
functions too), and the lock modules form one package."""

from __future__ import annotations

import ast
from pathlib import Path

import jobproc

ROOT = Path(jobproc.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The jobproc modules `path` imports anywhere in its body (a package's own
    `__init__` counts only when it is imported by name)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & modules


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: imports(path, set(paths)) - {name} for name, path in paths.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_circle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_main_and_zygote_do_not_import_each_other() -> None:
    edges = graph()
    assert "jobproc.main" not in edges["jobproc.zygote"]
    assert "jobproc.zygote" not in edges["jobproc.runner"]


def test_jobproc_has_no_import_circle() -> None:
    edges = graph()
    assert len(edges) > 20  # the walk saw the package
    assert cycle(edges) is None, cycle(edges)


def test_the_lock_modules_are_one_package() -> None:
    edges = graph()
    assert {"jobproc.locks.plan", "jobproc.locks.acquire", "jobproc.locks.strategy"} <= set(edges)
    assert not {"jobproc.acquire", "jobproc.locking_strategy", "jobproc.opcodes.locks"} & set(edges)
    # The package itself stays as cheap as luxid's registry needs: the plan vocabulary only.
    assert edges["jobproc.locks"] == {"jobproc.locks.plan"}
