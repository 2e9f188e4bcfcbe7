"""The queue's RAPI resources in Ganeti's shapes: jobs (J_FIELDS of rlib2, plus
Lockwarden's priority and pending_reason), Ganeti's WaitForJobChange, a job's priority
(`PUT /2/jobs/<id>/priority`, answered as Ganeti's LUXI ChangeJobPriority), and filter rules
(FILTER_RULE_FIELDS); and Lockwarden's why a job waits (`/2/jobs/<id>/why`, luxid's
why_job as it is).  luxid answers them through the async stub.
"""

from __future__ import annotations

from typing import Any

from client.api.why import WhyJob
from client.vocabulary import PRIORITY_MAX, PRIORITY_MIN
from rapi.routing import (
    MAX_JOB_ID,
    HttpError,
    Request,
    body_object,
    body_params,
    bulk,
    check_param,
    int_query,
    job_id,
    uri_list,
)

# Ganeti's /2/jobs/[id]/wait gives a job up to 10 s to change before answering null.
WAIT_TIMEOUT = 10.0
# rlib2's field lists (job fields are luxid's query_jobs fields); Lockwarden adds priority
# and pending_reason to the job resources.
_GANETI_J_FIELDS_BULK = [
    "id",
    "ops",
    "status",
    "summary",
    "opstatus",
    "received_ts",
    "start_ts",
    "end_ts",
]
J_FIELDS_BULK = [*_GANETI_J_FIELDS_BULK, "priority", "pending_reason"]
J_FIELDS = [*_GANETI_J_FIELDS_BULK, "oplog", "opresult", "priority", "pending_reason"]
FILTER_RULE_FIELDS = ["watermark", "priority", "predicates", "action", "reason_trail", "uuid"]
FILTER_BODY_PARAMS = ("priority", "predicates", "action", "reason")
PRIORITY_BODY_PARAMS = ("priority",)


async def get_jobs(req: Request) -> list[dict[str, Any]]:
    """Job ids and URIs, or (bulk) the jobs; archived jobs are left out."""
    if bulk(req):
        rows = await req.backend.luxi.query_jobs(ids=None, fields=J_FIELDS_BULK)
        return [dict(zip(J_FIELDS_BULK, row, strict=True)) for row in rows if row is not None]
    rows = await req.backend.luxi.query_jobs(ids=None, fields=["id"])
    return uri_list([row[0] for row in rows if row is not None], "/2/jobs/%s", "id")


async def get_job(req: Request) -> dict[str, Any]:
    """One job with Ganeti's job fields."""
    ident = job_id(req)
    rows = await req.backend.luxi.query_jobs(ids=[ident], fields=J_FIELDS)
    if not rows or rows[0] is None:
        raise HttpError(404, f"job {ident} not found")
    return dict(zip(J_FIELDS, rows[0], strict=True))


async def get_job_why(req: Request) -> WhyJob:
    """Why a job is not running: luxid's whole why_job answer (404 for an unknown job)."""
    return await req.backend.luxi.why_job(job_id=job_id(req))


async def delete_job(req: Request) -> list[Any]:
    """Cancel a job: `[success, message]` (`?kill=1` SIGKILLs a running job)."""
    ok, message = await req.backend.luxi.cancel_job(
        job_id=job_id(req), kill=bool(int_query(req, "kill"))
    )
    return [ok, message]


async def put_job_priority(req: Request) -> int:
    """Change the priority of a job's pending opcodes (body `{"priority": n}`, -20…19,
    luxid's change_job_priority, Ganeti's LUXI ChangeJobPriority): the job id; 409 with
    luxid's reason when nothing is pending (the job finished or is canceling)."""
    ident = job_id(req)
    data = body_params(req, PRIORITY_BODY_PARAMS, "a job's priority")
    if "priority" not in data:
        raise HttpError(400, "Required parameter 'priority' is missing; send {\"priority\": n}")
    priority = check_param(data, "priority", int, None)
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise HttpError(
            400,
            f"'priority' parameter must be {PRIORITY_MIN}…{PRIORITY_MAX} "
            f"(lower is more urgent), got {priority}",
        )
    ok, message = await req.backend.luxi.change_job_priority(job_id=ident, priority=priority)
    if not ok:
        raise HttpError(409, message)
    return ident


async def wait_job(req: Request) -> dict[str, Any] | None:
    """Ganeti's WaitForJobChange: a GET whose JSON body holds `fields`,
    `previous_job_info` and `previous_log_serial`; null if nothing changed in 10 s."""
    ident = job_id(req)
    body = body_object(req)
    if "fields" not in body:
        raise HttpError(400, "Required parameter 'fields' is missing")
    fields = body["fields"]
    previous = body.get("previous_job_info")
    serial = body.get("previous_log_serial")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise HttpError(400, "The 'fields' parameter should be a list")
    if not (previous is None or isinstance(previous, list)):
        raise HttpError(400, "The 'previous_job_info' parameter should be a list")
    if not (serial is None or (isinstance(serial, int) and not isinstance(serial, bool))):
        raise HttpError(400, "The 'previous_log_serial' parameter should be a number")
    if serial is not None and not -MAX_JOB_ID <= serial <= MAX_JOB_ID:
        raise HttpError(400, "The 'previous_log_serial' parameter is out of range")
    change = await req.backend.luxi.wait_for_job_change(
        job_id=ident,
        fields=fields,
        prev_values=previous,
        prev_log_serial=serial,
        timeout=WAIT_TIMEOUT,
    )
    if isinstance(change, str):
        return None
    return {"job_info": change.values, "log_entries": [list(entry) for entry in change.log]}


def filter_params(req: Request) -> tuple[int, list[Any], Any, list[Any]]:
    """rlib2's checkFilterParameters: priority, predicates, action, reason (with defaults)."""
    data = body_params(req, FILTER_BODY_PARAMS, "filter rule")
    priority = check_param(data, "priority", int, 0)
    predicates = check_param(data, "predicates", list, [])
    action = check_param(data, "action", (str, list), "CONTINUE")
    reason = check_param(data, "reason", list, [])
    if not -MAX_JOB_ID <= priority <= MAX_JOB_ID:
        raise HttpError(400, "'priority' parameter is out of range")
    return priority, predicates, action, reason


async def get_filters(req: Request) -> list[dict[str, Any]]:
    """Filter uuids and URIs, or (bulk) the filter rules."""
    if bulk(req):
        rows = await req.backend.luxi.query_filters(uuids=None, fields=FILTER_RULE_FIELDS)
        return [dict(zip(FILTER_RULE_FIELDS, row, strict=True)) for row in rows]
    rows = await req.backend.luxi.query_filters(uuids=None, fields=["uuid"])
    return uri_list([row[0] for row in rows], "/2/filters/%s", "uuid")


async def add_filter(req: Request) -> str:
    """Add a filter rule; its uuid."""
    priority, predicates, action, reason = filter_params(req)
    uuid: str = await req.backend.luxi.replace_filter(
        uuid=None, priority=priority, predicates=predicates, action=action, reason=reason
    )
    return uuid


async def get_filter(req: Request) -> dict[str, Any]:
    """One filter rule."""
    uuid = req.match["uuid"]
    rows = await req.backend.luxi.query_filters(uuids=[uuid], fields=FILTER_RULE_FIELDS)
    if not rows:
        raise HttpError(404, f"filter rule {uuid} not found")
    return dict(zip(FILTER_RULE_FIELDS, rows[0], strict=True))


async def replace_filter(req: Request) -> str:
    """Replace a filter rule, or create it under this uuid; its uuid."""
    priority, predicates, action, reason = filter_params(req)
    uuid: str = await req.backend.luxi.replace_filter(
        uuid=req.match["uuid"],
        priority=priority,
        predicates=predicates,
        action=action,
        reason=reason,
    )
    return uuid


async def delete_filter(req: Request) -> None:
    """Delete a filter rule."""
    await req.backend.luxi.delete_filter(uuid=req.match["uuid"])
