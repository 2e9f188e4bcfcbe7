"""wconfd's layers import downwards only (read from the source, nothing is imported).

At the bottom the pure cores (wconfd.config, wconfd.locking, wconfd.durable_state: no
I/O); above them wconfd.storage, which moves durable_state's records to disk or etcd;
above both the daemon (wconfd.persistence, the services, wconfd.service, ...).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WCONFD = Path(__file__).resolve().parents[3] / "wconfd"
PURE = ("wconfd.config", "wconfd.locking", "wconfd.durable_state")


def _module(path: Path) -> str:
    parts = path.relative_to(WCONFD.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _wconfd_imports(path: Path) -> set[str]:
    """The wconfd modules `path` imports (relative imports resolved)."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return {name for name in found if name == "wconfd" or name.startswith("wconfd.")}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _files(*modules: str) -> list[Path]:
    paths = []
    for module in modules:
        base = WCONFD.parent.joinpath(*module.split("."))
        paths += sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    return paths


@pytest.mark.parametrize("path", _files(*PURE), ids=lambda p: _module(p))
def test_pure_cores_import_only_pure_cores(path: Path) -> None:
    assert {m for m in _wconfd_imports(path) if not _within(m, PURE)} == set()


@pytest.mark.parametrize("path", _files("wconfd.storage"), ids=lambda p: _module(p))
def test_storage_imports_nothing_above_it(path: Path) -> None:
    allowed = (*PURE, "wconfd.storage")
    assert {m for m in _wconfd_imports(path) if not _within(m, allowed)} == set()
