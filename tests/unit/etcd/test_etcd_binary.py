"""Choosing the etcd binary (client.etcd_binary): releases that lose data on a crash
(etcd-io/etcd#13766) are used only when nothing else is installed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import etcd_binary
from client.etcd_binary import crash_unsafe, find_etcd, known_faults, parse_release


def fake_etcd(directory: Path, version: str) -> str:
    """An executable `etcd` in `directory` that reports `version` as etcd 3.x does."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "etcd"
    path.write_text(f"#!/bin/sh\necho 'etcd Version: {version}'\necho 'Go Version: go1.16'\n")
    path.chmod(0o755)
    return str(path)


Bins = tuple[Path, Path]


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bins]:
    """Install fake etcds beside a fake Python and on an otherwise empty PATH."""
    venv_bin, system_bin = tmp_path / "venv" / "bin", tmp_path / "usr" / "bin"
    venv_bin.mkdir(parents=True)
    system_bin.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(system_bin))
    monkeypatch.delenv(etcd_binary.OVERRIDE, raising=False)
    etcd_binary.release_of.cache_clear()
    yield venv_bin, system_bin
    etcd_binary.release_of.cache_clear()


def test_the_known_faulty_releases_only() -> None:
    assert [crash_unsafe(r) for r in [(3, 5, 0), (3, 5, 1), (3, 5, 2)]] == [True] * 3
    assert [crash_unsafe(r) for r in [(3, 4, 23), (3, 5, 3), (3, 6, 0), None]] == [False] * 4


def test_each_release_has_the_known_faults_of_its_line() -> None:
    def issues(release: tuple[int, ...] | None) -> list[str]:
        return [fault.issue for fault in known_faults(release)]

    both = ["etcd-io/etcd#13766", "etcd-io/etcd#15247"]
    revoke = ["etcd-io/etcd#15247"]
    assert issues((3, 5, 1)) == both and issues((3, 5, 2)) == both
    assert issues((3, 5, 3)) == revoke and issues((3, 5, 12)) == revoke
    assert issues((3, 4, 23)) == revoke and issues((3, 4, 30)) == revoke
    assert issues((3, 4, 31)) == issues((3, 5, 13)) == issues((3, 6, 0)) == []
    assert issues((3, 6, 4, 1)) == issues(None) == []


@given(st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 999)))
def test_release_read_back_from_version_text(release: tuple[int, int, int]) -> None:
    text = "etcd Version: {}.{}.{}\nGit SHA: e8732fb5f\n".format(*release)
    assert parse_release(text) == release
    assert parse_release('{"etcdserver":"' + ".".join(map(str, release)) + '"}') == release


def test_prefers_a_crash_safe_release_on_path_over_the_venvs(installed: Bins) -> None:
    venv_bin, system_bin = installed
    fake_etcd(venv_bin, "3.5.1")
    system = fake_etcd(system_bin, "3.4.23")
    assert find_etcd() == system


def test_the_venvs_first_when_both_are_safe(installed: Bins) -> None:
    venv_bin, system_bin = installed
    venv = fake_etcd(venv_bin, "3.5.9")
    fake_etcd(system_bin, "3.4.23")
    assert find_etcd() == venv


def test_a_faulty_release_when_it_is_the_only_one(installed: Bins) -> None:
    venv_bin, _ = installed
    venv = fake_etcd(venv_bin, "3.5.1")
    assert find_etcd() == venv


def test_none_installed(installed: Bins) -> None:
    assert find_etcd() is None


def test_the_override_wins(
    installed: Bins, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv_bin, _ = installed
    fake_etcd(venv_bin, "3.5.9")
    chosen = fake_etcd(tmp_path / "elsewhere", "3.5.1")
    monkeypatch.setenv(etcd_binary.OVERRIDE, chosen)
    assert find_etcd() == chosen
