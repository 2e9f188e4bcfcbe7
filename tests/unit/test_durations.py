"""Durations of the CLI (docs/contracts.md#drains-for-operators): parsing, canonical formatting, and
their round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("2h", 7200), ("1h30m", 5400), ("1d2h3m4s", 93784),
     ("90", 90), ("2.5", 2.5), (" 10M ", 600), ("0s", 0)],
)  # fmt: skip
def test_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "1x", "30m1h", "1h1h", "1h 30m", "-5", "1.5h", "nan",
                                  "inf", "h30m", "1h30"])  # fmt: skip
def test_parse_refuses_what_is_not_a_duration(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**9))
def test_parse_inverts_format(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.lists(st.integers(0, 999), min_size=4, max_size=4), st.sets(st.sampled_from("dhms"),
                                                                       min_size=1))  # fmt: skip
def test_format_of_parse_is_canonical_and_keeps_the_value(counts, units):
    text = "".join(f"{n}{u}" for n, u in zip(counts, "dhms", strict=True) if u in units)
    seconds = parse_duration(text)
    canonical = format_duration(seconds)
    assert parse_duration(canonical) == seconds
    assert format_duration(parse_duration(canonical)) == canonical


@pytest.mark.parametrize("text", ["9" * 400 + "d", "4000000000s", "1e300", "99999999999999999999"])
def test_absurd_durations_are_refused_not_overflowed(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
