"""The parsers of `lw`'s administrative command groups (lock, cluster, budget and
rapi-user) and of the top-level `lw events`, `lw audit`, `lw backup` and `lw store`.

Kept apart from client.cli.main (which builds the rest of the tree) so that module stays
small; each function fills one group's subparsers through main's builder (`b.leaf` adds a
command with the shared options and its lazily imported handler).
"""

from __future__ import annotations

import argparse
from typing import Any

from client.audit import DEFAULT_LIMIT, MAX_LIMIT
from client.cli.argtypes import audit_limit, duration, past_time, topics


def lock_commands(b: Any, sub: Any) -> None:
    b.leaf(sub, "list", "locks:lock_list", "all locks with their owners and waiters", b.table)


def cluster_commands(b: Any, sub: Any) -> None:
    b.leaf(
        sub,
        "role",
        "roles:cluster_role",
        "every control-plane node and its role (master or standby)",
        b.table,
    )
    failover = b.leaf(
        sub,
        "failover",
        "roles:cluster_failover",
        "ask the master to step down so that a standby takes over",
        description="Ask the master's wconfd to give up its lease; the next standby takes "
        "over within moments. Run it on the master's node (on a standby it names the "
        "master). Exit 1 if no other node became master within --wait seconds, or "
        "sooner if this node won the election again after its pause of one lease TTL "
        "(no standby is up).",
    )
    failover.add_argument(
        "--wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the new master (default 10)",
    )


def budget_commands(b: Any, sub: Any) -> None:
    b.leaf(sub, "list", "budgets:budget_list", "every disruption budget", b.table)
    b.leaf(
        sub, "info", "budgets:budget_info", "one budget: members, disrupted, events", b.table
    ).add_argument("name")
    put = b.leaf(
        sub,
        "set",
        "budgets:budget_set",
        "add or replace a disruption budget",
        description="At most --max-disrupted of the instances carrying one of --tags may be "
        "disrupted at once (down, or moved, shut down, removed or having disks replaced by a "
        "running job). luxid holds any job that would disrupt more, from every entry point, "
        "until a member is back; an opcode with ignore_budgets: true goes past it. See "
        "docs/contracts.md#disruption-budgets.",
    )
    put.add_argument("name")
    put.add_argument("--tags", required=True, help="instance tags, comma-separated (web,db)")
    put.add_argument(
        "--max-disrupted", type=int, required=True, metavar="N", help="members disrupted at once"
    )
    b.leaf(sub, "delete", "budgets:budget_delete", "delete a budget").add_argument("name")


def _rapi_state_dir() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--rapi-state-dir",
        metavar="DIR",
        help="lw-rapi's state directory, holding rapi_users, rapi_tokens and rapi_audit.sqlite "
        "(default: "
        "$LW_RAPI_STATE_DIR, else /var/lib/lockwarden-rapi if it exists, else the state "
        "directory)",
    )
    return parser


def user_commands(b: Any, sub: Any) -> None:
    where = _rapi_state_dir()
    add = b.leaf(sub, "add", "rapi_users:user_add", "add or replace a RAPI user", where)
    add.add_argument("name")
    add.add_argument(
        "--roles",
        metavar="R,...",
        help="roles, comma-separated: jobs, filters, drains, instances, audit, admin, write "
        "(write: every role but audit and admin); without: read only",
    )
    add.add_argument("--write", action="store_true", help="the same as --roles write")
    add.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of stdin instead of prompting",
    )
    b.leaf(
        sub, "list", "rapi_users:user_list", "list the RAPI users and their roles", b.table, where
    )
    b.leaf(sub, "remove", "rapi_users:user_remove", "remove a RAPI user", where).add_argument(
        "name"
    )
    token = b.leaf(
        sub,
        "token",
        "rapi_tokens:token_create",
        "make a bearer token for a RAPI user; prints it once, and its id",
        where,
    )
    token.add_argument("name")
    token.add_argument(
        "--roles",
        metavar="R,...",
        help="the token's roles, at most the user's (default: the user's, as they are then)",
    )
    token.add_argument(
        "--expires", type=duration, metavar="DURATION", help="lifetime: 12h, 30d (default: never)"
    )
    tokens = b.leaf(
        sub, "tokens", "rapi_tokens:token_list", "list tokens (ids, never tokens)", b.table, where
    )
    tokens.add_argument("name", nargs="?", help="only this user's")
    b.leaf(sub, "revoke", "rapi_tokens:token_revoke", "end a token at once", where).add_argument(
        "id"
    )


def events_command(b: Any, top: Any) -> None:
    events = b.leaf(
        top,
        "events",
        "events:events",
        "print what changed: both daemons' events, one a line",
        description="Print the events both daemons still keep from the last --since (jobs,\n"
        "drains, filters, the queue, configuration objects, roles; locks only when asked\n"
        "for), oldest first, one a line: time, daemon, topic, action, key and the details\n"
        "as JSON.  With --follow, go on printing new ones as they happen until Ctrl-C.\n"
        "See docs/contracts.md#events.",
    )
    events.add_argument(
        "--topics",
        type=topics,
        metavar="T,...",
        help="only these topics (job, drain, filter, budget, queue, lock, config, role); "
        "default: every topic but lock",
    )
    events.add_argument(
        "--since",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="how far back to start, e.g. 90s, 15m, 2h (default 10m)",
    )
    events.add_argument(
        "--follow", action="store_true", help="keep printing new events until Ctrl-C"
    )
    events.add_argument(
        "--json", action="store_true", help="print each event as one JSON object a line"
    )


def audit_command(b: Any, top: Any) -> None:
    audit = b.leaf(
        top,
        "audit",
        "audit:audit",
        "who changed what: both daemons' audit logs and lw-rapi's, merged by time",
        b.table,
        _rapi_state_dir(),
        description="Print the audit log: every change made through wconfd and luxid (who\n"
        "acted, the peer's uid, the method, the object, the outcome) and RAPI user and\n"
        "token changes from lw-rapi's audit file where it is readable, merged by time,\n"
        "newest last.  See docs/contracts.md#audit-log.",
    )
    for option, which in (("--since", "from then on"), ("--until", "before then")):
        audit.add_argument(
            option,
            type=past_time,
            metavar="D|TIME",
            help=f"entries {which}: a duration ago (1h, 2d) or an ISO 8601 time",
        )
    audit.add_argument(
        "--actor", metavar="A", help="only this actor (cli:root, rapi:alice, job:42)"
    )
    audit.add_argument("--target", metavar="T", help="only this target (instance/web1, job/42)")
    audit.add_argument(
        "--limit",
        type=audit_limit,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"the newest N entries (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    )


def backup_command(b: Any, top: Any) -> None:
    backup = b.leaf(
        top,
        "backup",
        "backup:backup",
        "take a consistent backup of both daemons' state while they serve",
        description="Ask wconfd and luxid for their parts (the configuration at one serial, "
        "the job store at one transaction) and write them with a manifest.json of SHA-256 "
        "hashes into DIR/lockwarden-backup-<YYYYmmddTHHMMSSZ>/; print its path. DIR must "
        "exist. Restore with `lw store copy --from BACKUP --to STATE_DIR`; see "
        "docs/operations.md#backups.",
    )
    backup.add_argument("dir", metavar="DIR", help="an existing directory to write the backup in")


def store_commands(b: Any, sub: Any) -> None:
    copy = b.leaf(
        sub,
        "copy",
        "backup:store_copy",
        "copy the whole control-plane state between stores (daemons stopped)",
        description="Copy the configuration (serial included), reservations, filters, "
        "drains, budgets and jobs (statuses, logs, ids; the next job id continues) from SRC "
        "to DST. Each is a state directory, an etcd://HOST:PORT[,...]/PREFIX (or etcds://) "
        "store, or (SRC only) a backup of lw backup. Refused, changing nothing, while a "
        "daemon serves SRC or DST, when DST is not empty (unless --force, which replaces "
        "it whole), or when the backup is damaged. See "
        "docs/operations.md#moving-to-three-machines.",
    )
    copy.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="SRC",
        help="a stopped state directory, etcd://... store, or a backup directory",
    )
    copy.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="DST",
        help="a state directory or etcd://... store no daemon serves",
    )
    copy.add_argument(
        "--force", action="store_true", help="replace a DST that is not empty (never merges)"
    )
