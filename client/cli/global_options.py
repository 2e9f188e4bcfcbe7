"""`lw`'s global options, given before the command: the directories (`--run-dir`,
`--state-dir`, also accepted after it) and etcd's security options (client.etcd_security);
and which command group an argument list names, found without parsing it whole (building
every group's parser costs more than the rest of `lw`'s start-up)."""

from __future__ import annotations

import argparse
from collections.abc import Container, Sequence


def dir_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--run-dir/--state-dir; below the top level they only override when given."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--run-dir",
        metavar="DIR",
        default=default,
        help="the daemons' socket directory (default: $LW_RUN_DIR, /run/lockwarden for root, "
        "else $XDG_RUNTIME_DIR/lockwarden)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        default=default,
        help="the state directory, for `lw up` and `lw rapi-user` (default: $LW_STATE_DIR, "
        "/var/lib/lockwarden for root, else $XDG_STATE_HOME/lockwarden)",
    )


VALUED_GLOBALS = frozenset(
    ["--run-dir", "--state-dir", "--etcd-ca", "--etcd-cert", "--etcd-key", "--etcd-user",
     "--etcd-password-file"]
)  # fmt: skip
"""The global options that take a value (the word after them is no command)."""


def first_word(argv: Sequence[str], groups: Container[str]) -> str | None:
    """The command group `argv` names (its first positional word), if it is in `groups`."""
    args = iter(argv)
    for arg in args:
        if arg in VALUED_GLOBALS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg if arg in groups else None
    return None
