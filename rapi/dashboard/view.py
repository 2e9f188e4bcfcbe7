"""What the dashboard shows, computed from what the daemons answered (pure: no I/O).

`build_view` turns wconfd's configuration and lock table and luxid's queue info, queue
overview (which jobs to show: luxid chooses them, `query_queue_overview`), job rows and
filter rows into one plain-JSON document the page renders as it is.  Long lists are cut
(`MAX_QUEUED` queued jobs shown, the rest counted), but nothing is silently dropped: every
queued job's pending_reason is counted in `pending_reasons`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from client.vocabulary import ACTIVE_STATUSES, FINALIZED_STATUSES

# The fields asked of the jobs the page lists (see detail_ids), in this order.
JOB_FIELDS = ("id", "status", "summary", "priority", "pending_reason", "opstatus",
              "received_ts", "start_ts", "end_ts")  # fmt: skip
FILTER_FIELDS = ("uuid", "priority", "action", "predicates", "reason_trail")
ACTIVE = ACTIVE_STATUSES
FINAL = FINALIZED_STATUSES
MAX_QUEUED = 200
MAX_RECENT = 10


def owner_label(client_id: str) -> dict[str, Any]:
    """A lock owner for people: `job 42` for a job process, else the client's name and pid."""
    who, _, rest = client_id.partition(":")
    pid = rest.partition(":")[0]
    if who.startswith("job-") and who[4:].isdigit():
        return {"job": int(who[4:]), "label": f"job {who[4:]}", "pid": pid}
    return {"job": None, "label": f"{who} (pid {pid})" if pid else who, "pid": pid}


def _nodes(config: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    groups = {uuid: g.get("name", uuid) for uuid, g in config.get("nodegroups", {}).items()}
    names = {uuid: n.get("name", uuid) for uuid, n in config.get("nodes", {}).items()}
    placed = Counter(i.get("primary_node") for i in config.get("instances", {}).values())
    nodes = [
        {
            "name": n.get("name", uuid),
            "group": groups.get(n.get("group", ""), n.get("group")),
            "ip": n.get("primary_ip"),
            "offline": bool(n.get("offline")),
            "drained": bool(n.get("drained")),
            "instances": placed.get(uuid, 0),
        }
        for uuid, n in config.get("nodes", {}).items()
    ]
    return sorted(nodes, key=lambda n: n["name"]), names


def _instances(config: dict[str, Any], node_names: dict[str, str]) -> list[dict[str, Any]]:
    out = [
        {
            "name": i.get("name", uuid),
            "node": node_names.get(i.get("primary_node", ""), i.get("primary_node")),
            "state": i.get("admin_state"),
            "memory": i.get("memory"),
            "vcpus": i.get("vcpus"),
        }
        for uuid, i in config.get("instances", {}).items()
    ]
    return sorted(out, key=lambda i: i["name"])


def _drains(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The drains of `config["drains"]` with their progress; [] if none."""
    raw = config.get("drains") or {}
    records = raw.items() if isinstance(raw, dict) else ((None, r) for r in raw)
    out = []
    for key, rec in records:
        if not isinstance(rec, dict):
            continue
        total, remaining = rec.get("total") or 0, rec.get("remaining") or 0
        done = max(0, total - remaining)
        out.append(
            {
                "target": rec.get("target", key),
                "status": rec.get("status"),
                "total": total,
                "remaining": remaining,
                "percent": round(100 * done / total) if total else 100,
                "deadline": rec.get("deadline"),
                "message": rec.get("message", ""),
            }
        )
    return sorted(out, key=lambda d: str(d["target"]))


def _locks(all_locks: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    locks = [
        {
            "name": lock["name"],
            "owners": [{**owner_label(o["client_id"]), "mode": o["mode"]} for o in lock["owners"]],
        }
        for lock in all_locks.get("locks", [])
    ]
    waiters = [
        {
            **owner_label(p["client_id"]),
            "priority": p["priority"],
            "request": [list(r) for r in p["request"]],
            "since": p["since"],
        }
        for p in all_locks.get("pending", [])
    ]
    return sorted(locks, key=lambda lk: lk["name"]), sorted(waiters, key=lambda w: w["since"])


def budget_view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each disruption budget as the page shows it: name, tags, how many of how many
    members are disrupted, and the disrupted ones with why."""
    return [
        {
            "name": row["name"],
            "tags": row["tags"],
            "max_disrupted": row["max_disrupted"],
            "members": len(row["members"]),
            "disrupted": row["disrupted"],
        }
        for row in rows
    ]


def why_ids(view: dict[str, Any]) -> list[int]:
    """The jobs shown beside why they wait: the queued ones listed and the waiting ones."""
    waiting = [j["id"] for j in view["active"] if j["status"] == "waiting"]
    return [*(j["id"] for j in view["queued"]), *waiting]


def add_why(view: dict[str, Any], first_steps: dict[int, str]) -> None:
    """Put each listed job's first why_job Step (its text) in its `why` (None if nothing
    holds it, or it moved on meanwhile)."""
    for job in (*view["queued"], *view["active"]):
        job["why"] = first_steps.get(job["id"])


def detail_ids(overview: dict[str, Any]) -> list[int]:
    """The jobs whose details the page shows: those the overview chose."""
    return sorted({*overview["queued"], *overview["active"], *overview["recent"]})


def _has(jobs: dict[int, dict[str, Any]], job_id: int, statuses: tuple[str, ...]) -> bool:
    job = jobs.get(job_id)
    return job is not None and job["status"] in statuses


def build_view(
    config: dict[str, Any],
    queue_info: dict[str, Any],
    overview: dict[str, Any],
    detail_rows: list[list[Any] | None],
    filter_rows: list[list[Any]],
    all_locks: dict[str, Any],
) -> dict[str, Any]:
    """The dashboard document (see the module docstring): `overview` as luxid's
    query_queue_overview answers it, `detail_rows` (JOB_FIELDS) of its `detail_ids`."""
    jobs = [dict(zip(JOB_FIELDS, row, strict=True)) for row in detail_rows if row is not None]
    jobs.sort(key=lambda j: j["id"])
    by_id = {j["id"]: j for j in jobs}  # a job that moved on since the overview is left out
    queued = [by_id[i] for i in overview.get("queued", []) if _has(by_id, i, ("queued",))]
    recent = [by_id[i] for i in overview.get("recent", []) if _has(by_id, i, FINAL)]
    locks, waiters = _locks(all_locks)
    held_by_job: dict[int, list[list[str]]] = {}
    for lock in locks:
        for owner in lock["owners"]:
            if owner["job"] is not None:
                held_by_job.setdefault(owner["job"], []).append([lock["name"], owner["mode"]])
    waiting_by_job = {w["job"]: w["request"] for w in waiters if w["job"] is not None}
    active = [
        {**j, "locks": held_by_job.get(j["id"], []), "wants": waiting_by_job.get(j["id"], [])}
        for j in jobs
        if j["status"] in ACTIVE
    ]
    nodes, node_names = _nodes(config)
    cluster = config.get("cluster", {})
    return {
        "serial": config.get("serial_no", 0),
        "cluster": {
            "name": cluster.get("name", "lockwarden"),
            "max_running_jobs": queue_info.get("max_running_jobs"),
            "running": queue_info.get("running", 0),
            "drained": bool(queue_info.get("drained")),
            "nodes": len(nodes),
            "instances": len(config.get("instances", {})),
            "filters": queue_info.get("filters", len(filter_rows)),
            "locks": len(locks),
            "waiters": len(waiters),
        },
        "counts": queue_info.get("counts", {}),
        "nodes": nodes,
        "instances": _instances(config, node_names),
        "queued": queued,
        "queued_total": overview.get("queued_total", 0),
        "pending_reasons": [
            [reason or "about to start", n] for reason, n in overview.get("pending_reasons", [])
        ],
        "active": active,
        "recent": recent,
        "drains": _drains(config),
        "filters": [dict(zip(FILTER_FIELDS, row, strict=True)) for row in filter_rows],
        "locks": locks,
        "waiters": waiters,
    }
