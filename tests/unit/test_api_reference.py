"""docs/api.md is generated from the API declarations and must say what they say."""

from __future__ import annotations

import re
from pathlib import Path

from client._server import roles
from client.api import reference
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_docs_api_md_is_current() -> None:
    expected = reference.render()
    found = API_MD.read_text(encoding="utf-8") if API_MD.exists() else ""
    assert found == expected, (
        "docs/api.md is stale: the API declarations in client/api/ changed. "
        "Run `make docs` and commit docs/api.md."
    )


def test_render_is_deterministic() -> None:
    assert reference.render() == reference.render()


def test_every_method_has_a_section() -> None:
    text = reference.render()
    for api in (WConfdApi, LuxiApi):
        for name in api.methods():
            assert f"\n### `{name}`\n" in text, name


def test_every_link_has_its_heading_and_headings_are_unique() -> None:
    text = reference.render()
    headings = re.findall(r"^#{1,3} (.+)$", text, flags=re.MULTILINE)
    anchors = [
        re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower().replace(" ", "-")
        for heading in headings
    ]
    assert len(anchors) == len(set(anchors)), "two headings would share one anchor"
    for link in set(re.findall(r"\]\(#([\w-]+)\)", text)):
        assert link in anchors, f"link #{link} has no heading"


def test_standby_methods_match_the_server() -> None:
    assert set(reference.STANDBY_METHODS) == roles.STANDBY_METHODS


def test_types_are_readable() -> None:
    assert reference.type_text(list[str] | None) == "list[str] | None"
    text = reference.render()
    assert "| `nodes` | list[str] \\| None | `null` |" in text
    assert "[DrainStatus](#drainstatus)" in text
