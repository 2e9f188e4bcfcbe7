"""The name rules of client.names (docs/contracts.md#names), as properties: every RFC 1123
host name passes and nothing else does; client names and tags are exactly their
character classes and lengths; no rule lets a newline through."""

from __future__ import annotations

import re
import string

from hypothesis import given
from hypothesis import strategies as st

from client.names import is_client_name, is_host_name, is_tag

_ALNUM = string.ascii_letters + string.digits
label = st.builds(
    lambda first, middle, last: first + middle + last if middle or last else first,
    st.sampled_from(_ALNUM),
    st.text(_ALNUM + "-", max_size=61),
    st.sampled_from(["", *_ALNUM]),
).filter(lambda s: not s.endswith("-"))
host_name = st.lists(label, min_size=1, max_size=6).map(".".join).filter(lambda s: len(s) <= 253)


@given(host_name)
def test_every_host_name_passes(name):
    assert is_host_name(name)


@given(host_name, st.sampled_from(["-", ".", "\n", " ", "_", "/", "é", "<", ":"]), st.data())
def test_a_foreign_character_or_bad_dot_or_dash_fails(name, bad, data):
    where = data.draw(st.sampled_from(["start", "end", "inside"]))
    if where == "start":
        broken = bad + name
    elif where == "end":
        broken = name + bad
    else:
        if bad in "-.":  # a dash or dot inside a label is fine; two dots are not
            bad = ".." if bad == "." else "_"
        i = data.draw(st.integers(0, len(name)))
        broken = name[:i] + bad + name[i:]
    assert not is_host_name(broken)


def test_lengths_and_the_probes():
    assert is_host_name("a" * 63) and not is_host_name("a" * 64)
    longest = ".".join(["a" * 63] * 3 + ["a" * 61])
    assert len(longest) == 253 and is_host_name(longest)
    assert not is_host_name(longest + "a") and not is_host_name("")
    for bad in ("<img src=x onerror=alert(1)>", "web1.", ".web1", "web1\n", "web 1", "[lockset]"):
        assert not is_host_name(bad)


@given(st.text(max_size=80))
def test_client_names_and_tags_are_their_classes(text):
    assert is_client_name(text) == bool(re.fullmatch(r"[A-Za-z0-9._@+-]{1,64}", text))
    assert is_tag(text) == bool(re.fullmatch(r"[A-Za-z0-9._:+-]{1,128}", text))
    assert not is_client_name(text + "\n") and not is_tag(text + "\n")
