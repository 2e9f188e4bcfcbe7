"""The pure rules of backups (docs/contracts.md#backups-and-store-copy): which `dir` a
daemon's `backup` takes, and how a backup's manifest is checked before a copy."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.api.common import check_backup_dir
from client.backup import (
    FORMAT,
    BackupRefused,
    LuxidPart,
    Manifest,
    WconfdPart,
    backup_name,
    encode_manifest,
    hash_tree,
    verify,
)
from client.errors import InvalidParams

PARTS = st.sampled_from(["a", "b", "..", ".", "", "x y", "ü", "..."])


@given(st.lists(PARTS, max_size=5), st.booleans())
def test_an_accepted_dir_stays_below_backups(parts: list[str], absolute: bool) -> None:
    value = ("/" if absolute else "") + "/".join(parts)
    try:
        check_backup_dir(value)
    except InvalidParams as exc:
        assert exc.data["param"] == "dir" and "`dir`" in exc.message
        return
    joined = posixpath.normpath(posixpath.join("/state/backups", value))
    assert joined.startswith("/state/backups/")


@pytest.mark.parametrize("bad", ["", ".", "/abs", "../x", "a/../../b", "a/..", "a\0b"])
def test_these_dirs_are_refused(bad: str) -> None:
    with pytest.raises(InvalidParams):
        check_backup_dir(bad)


def test_backup_name_is_utc() -> None:
    assert backup_name(0.0) == "lockwarden-backup-19700101T000000Z"


def _backup(root: Path) -> Path:
    (root / "wconfd").mkdir(parents=True)
    (root / "luxid").mkdir()
    (root / "wconfd" / "wconfd.snapshot.json").write_text("{}")
    (root / "luxid" / "jobs.sqlite").write_bytes(b"db")
    manifest = Manifest(FORMAT, 1.5, WconfdPart(3), LuxidPart(7), hash_tree(root))
    (root / "manifest.json").write_bytes(encode_manifest(manifest))
    return root


def test_verify_names_the_damaged_file_and_an_unknown_format(tmp_path: Path) -> None:
    root = _backup(tmp_path / "b")
    assert verify(root).luxid.last_job_id == 7
    assert set(json.loads((root / "manifest.json").read_bytes())["files"]) == {
        "wconfd/wconfd.snapshot.json",
        "luxid/jobs.sqlite",
    }
    (root / "luxid" / "jobs.sqlite").write_bytes(b"dB")
    with pytest.raises(BackupRefused) as caught:
        verify(root)
    assert caught.value.message == "luxid/jobs.sqlite: sha256 differs from the manifest"
    raw = json.loads((root / "manifest.json").read_bytes())
    raw["format"] = 99
    (root / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(BackupRefused) as caught:
        verify(root)
    assert caught.value.message == (
        "manifest.json: unknown backup format 99 (this lw reads format 1)"
    )
