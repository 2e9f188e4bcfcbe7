"""The argument parser every Lockwarden console script uses (`lw`, `lw-wconfd`, `lw-luxid`,
`lw-rapi`): argparse without abbreviations, and never echoing a password.

Abbreviated options are refused (`allow_abbrev=False`): a prefix such as `--etcd-password`
would otherwise be taken for `--etcd-password-file`, and a value meant as a password read as
a file name. An unknown option named as a password (`--…password`, its start
`--…pass`, `--…secret`) is a usage error that names the option and not its value: a password belongs in a file (docs/operations.md#etcd-over-tls).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# An option named as a password (or its start: --etcd-pass), not one such as
# --password-stdin or --etcd-password-file that names where a password comes from.
_PASSWORD_OPTION = re.compile(r"--[\w-]*(pass(w(o(rd?)?)?)?|passwd|secret)")


class StrictParser(argparse.ArgumentParser):
    """argparse.ArgumentParser with `allow_abbrev=False`; its subparsers are StrictParsers too
    (argparse makes subparsers of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        _refuse_passwords(self, args)
        return super().parse_known_args(args, namespace)


def _refuse_passwords(parser: argparse.ArgumentParser, args: Sequence[str]) -> None:
    for arg in args:
        if arg == "--":
            return
        name = arg.split("=", 1)[0]
        found = _PASSWORD_OPTION.fullmatch(name)
        if found and name not in parser._option_string_actions:
            _usage_error(parser, name)


def _usage_error(parser: argparse.ArgumentParser, option: str) -> NoReturn:
    parser.error(
        f"{option} is not an option: a password is never taken on the command line; "
        "write it to a file readable only by you and give the matching --…-password-file FILE"
    )
