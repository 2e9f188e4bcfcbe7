"""The argument types of `lw`'s options: each parses one option's text or says, as an
argparse error, what is wrong with it (so a typo is a usage error, exit 2)."""

from __future__ import annotations

import argparse

from client.vocabulary import PRIORITY_HINT, PRIORITY_MAX, PRIORITY_MIN


def priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise argparse.ArgumentTypeError(f"{value} is outside {PRIORITY_HINT}")
    return value


def yes_no(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("yes", "y", "true", "1"):
        return True
    if lowered in ("no", "n", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected yes or no, got {text!r}")


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def duration(text: str) -> float:
    """Seconds from `90s`, `15m`, `2h`, `1h30m` (client.durations)."""
    from client.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def start_time(text: str) -> float:
    """Seconds since the epoch from an ISO 8601 time: `2026-12-24T02:00`, `2026-12-24 02:00`,
    `2026-12-24T02:00+01:00`, `2026-12-24T01:00Z`; local time unless it has an offset."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r} (e.g. 2026-12-24T02:00 in local time, or "
            "2026-12-24T02:00+01:00 with an offset)"
        ) from None
    try:
        return when.timestamp()  # a time without an offset is local time
    except (OverflowError, OSError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range") from None


def audit_limit(text: str) -> int:
    """How many audit entries: 0 to client.audit.MAX_LIMIT."""
    from client.audit import MAX_LIMIT

    value = non_negative_int(text)
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"at most {MAX_LIMIT}, got {value}")
    return value


def past_time(text: str) -> float:
    """Seconds since the epoch from a duration ago (`1h`: an hour ago, client.durations)
    or an ISO 8601 time (`start_time`)."""
    import time

    from client.durations import parse_duration

    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        return start_time(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"not a duration or a time: {text!r} (1h, 30m, 2d for that long ago; or "
            "2026-12-24T02:00 in local time, 2026-12-24T02:00+01:00 with an offset)"
        ) from None


_SIZE_UNITS = {"": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def size_mib(text: str) -> int:
    """A size in MiB: `512`, `512M`, `2G`, `1.5T` (binary units)."""
    import re

    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([mgt]?)(?:i?b)?", text.strip().lower())
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512, 512M, 10G)")
    mib = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    if mib < 1:
        raise argparse.ArgumentTypeError(f"size must be at least 1 MiB, got {text!r}")
    return mib


def topics(text: str) -> list[str]:
    """`job,drain`: event topics (docs/contracts.md#events), each one known."""
    from client.api.common import TOPICS

    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TOPICS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown topic(s) {', '.join(unknown) or repr(text)}; known: {', '.join(TOPICS)}"
        )
    return names
