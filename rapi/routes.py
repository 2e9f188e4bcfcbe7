"""The RAPI's route table (docs/contracts.md#rapi-paths): every method on every resource, in
one place.

The HTTP application (`rapi.app`) and the OpenAPI document (`rapi.openapi`) are both
derived from `ROUTES`; a new resource (metrics, a dashboard, drains) is one more `Route`
here, with its handler in its own module.  `RPC_STATUS` says how each typed daemon error
is answered.
"""

from __future__ import annotations

from client import errors
from client.audit import DEFAULT_LIMIT, MAX_LIMIT
from rapi import audit, budgets, cluster, drains, events, instanceops, jobs, nodeops, tokens
from rapi.routing import Handler, Param, Route
from rapi.schemas import BULK, INT, JOB_ID, NAME, NUM, STR, STR_LIST, TOPICS, UUID, list_of, ref

# The roles writes need (docs/operations.md#rapi-users-roles-and-tokens); each route names
# the narrowest role that grants it, and a 403 names that role.
JOBS, FILTERS, DRAINS, INSTANCES, ADMIN = "jobs", "filters", "drains", "instances", "admin"
AUDIT = "audit"
DRY_RUN = Param("dry-run", "query", {"type": "integer", "enum": [0]}, "1 is refused: jobs run")
NO_REMEMBER = Param(
    "no_remember", "query", {"type": "integer", "enum": [0]}, "1 is refused: state is recorded"
)
REASON = Param("reason", "query", {"type": "string"}, "the reason, first in the job's trail")
INSTANCE_JOB_ERRORS = (400, 404, 503)


def instance_op(
    method: str, path: str, handler: Handler, summary: str, body: str, *query: Param
) -> Route:
    """A route of Ganeti's instance operations: the instance's name, Ganeti's
    `reason` query argument, a body of `body`'s schema, and a job id back; role instances."""
    return Route(
        method,
        path,
        handler,
        summary + "; the job id",
        role=INSTANCES,
        params=(NAME, REASON, *query),
        body=ref(body),
        response=INT,
        errors=INSTANCE_JOB_ERRORS,
    )


MAX_PARALLEL = Param(
    "max_parallel", "query", {"type": "integer", "minimum": 1, "default": 1}, "moves at once"
)
KEEP_DRAINED = Param(
    "keep_drained", "query", {"type": "integer", "enum": [0, 1]}, "1: the node stays drained"
)

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/version",
        cluster.get_version,
        "the remote API version (2)",
        public=True,
        response=INT,
    ),
    Route("GET", "/2/features", cluster.get_features, "optional features", response=STR_LIST),
    Route("GET", "/2/info", cluster.get_info, "cluster information", response=ref("Info")),
    Route(
        "GET",
        "/2/nodes",
        cluster.get_nodes,
        "nodes (bulk=1: full objects)",
        params=(BULK,),
        response=list_of("IdUri", "Node"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/nodes/{name}",
        cluster.get_node,
        "one node",
        params=(NAME,),
        response=ref("Node"),
        errors=(404,),
    ),
    Route(
        "GET",
        "/2/nodes/{name}/role",
        nodeops.get_node_role,
        "the node's role (Ganeti's GetNodeRole)",
        params=(NAME,),
        response=ref("NodeRole"),
        errors=(404,),
    ),
    Route(
        "PUT",
        "/2/nodes/{name}/role",
        nodeops.put_node_role,
        "set the node's role flags (Ganeti's SetNodeRole; drained: the flag only, no moves); "
        "the job id",
        role=DRAINS,
        params=(NAME,),
        body=ref("NodeRoleBody"),
        response=INT,
        errors=(400, 404, 503),
    ),
    Route(
        "POST",
        "/2/nodes/{name}/evacuate",
        nodeops.post_node_evacuate,
        "migrate the node's primary instances away (OP_NODE_EVACUATE, Ganeti's "
        "EvacuateNode); the job id",
        role=DRAINS,
        params=(NAME,),
        body=ref("EvacuateBody"),
        response=INT,
        errors=(400, 404, 503),
    ),
    Route(
        "GET",
        "/2/nodes/{name}/drain",
        drains.get_node_drain,
        "the node's drain: status and progress",
        params=(NAME,),
        response=ref("DrainStatus"),
        errors=(404, 501),
    ),
    Route(
        "PUT",
        "/2/nodes/{name}/drain",
        drains.put_node_drain,
        "drain the node (move its instances away before a deadline), or change its drain",
        role=DRAINS,
        params=(NAME,),
        body=ref("DrainBody"),
        response=ref("DrainStatus"),
        errors=(400, 404, 501),
    ),
    Route(
        "GET",
        "/2/nodes/{name}/drain/plan",
        drains.get_node_drain_plan,
        "what a drain of the node would do now, changing nothing: moves, blocked instances, "
        "budgets, waves",
        params=(NAME, MAX_PARALLEL),
        response=ref("DrainPlan"),
        errors=(400, 404, 501),
    ),
    Route(
        "DELETE",
        "/2/nodes/{name}/drain",
        drains.delete_node_drain,
        "cancel the node's drain (queued moves are canceled; running ones finish)",
        role=DRAINS,
        params=(NAME, KEEP_DRAINED),
        response=ref("DrainStatus"),
        errors=(400, 404, 501),
    ),
    Route(
        "GET",
        "/2/drains",
        drains.get_drains,
        "every node drain, and the queue drain if any",
        response={"type": "array", "items": ref("DrainStatus")},
        errors=(501,),
    ),
    Route(
        "GET",
        "/2/instances",
        cluster.get_instances,
        "instances (bulk=1: full objects)",
        params=(BULK,),
        response=list_of("IdUri", "Instance"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/instances/{name}",
        cluster.get_instance,
        "one instance",
        params=(NAME,),
        response=ref("Instance"),
        errors=(404,),
    ),
    Route(
        "POST",
        "/2/instances",
        instanceops.post_instances,
        "create an instance from Ganeti's version 1 request (OP_INSTANCE_CREATE, placed by "
        "room without pnode); the job id",
        role=INSTANCES,
        params=(REASON, DRY_RUN),
        body=ref("InstanceCreateBody"),
        response=INT,
        errors=(400, 503),
    ),
    instance_op(
        "DELETE",
        "/2/instances/{name}",
        instanceops.delete_instance,
        "remove the instance (OP_INSTANCE_REMOVE)",
        "InstanceRemoveBody",
        DRY_RUN,
    ),
    instance_op(
        "PUT",
        "/2/instances/{name}/migrate",
        instanceops.put_migrate,
        "migrate the instance to target_node, or where placement finds room (OP_INSTANCE_MIGRATE)",
        "MigrateBody",
    ),
    instance_op(
        "PUT",
        "/2/instances/{name}/failover",
        instanceops.put_failover,
        "fail the instance over to target_node, or where placement finds room "
        "(OP_INSTANCE_FAILOVER)",
        "FailoverBody",
    ),
    instance_op(
        "PUT",
        "/2/instances/{name}/shutdown",
        instanceops.put_shutdown,
        "shut the instance down: admin_state down (OP_INSTANCE_SHUTDOWN)",
        "ShutdownBody",
        DRY_RUN,
        NO_REMEMBER,
    ),
    instance_op(
        "PUT",
        "/2/instances/{name}/startup",
        instanceops.put_startup,
        "start the instance up: admin_state up (OP_INSTANCE_STARTUP)",
        "StartupBody",
        DRY_RUN,
        NO_REMEMBER,
    ),
    Route(
        "GET",
        "/2/groups",
        cluster.get_groups,
        "node groups (bulk=1: full objects)",
        params=(BULK,),
        response=list_of("IdUri", "Group"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/groups/{name}",
        cluster.get_group,
        "one node group",
        params=(NAME,),
        response=ref("Group"),
        errors=(404,),
    ),
    Route(
        "GET",
        "/2/jobs",
        jobs.get_jobs,
        "jobs that are not archived (bulk=1: full objects)",
        params=(BULK,),
        response=list_of("IdUri", "Job"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/jobs/{job_id}",
        jobs.get_job,
        "one job",
        params=(JOB_ID,),
        response=ref("Job"),
        errors=(400, 404),
    ),
    Route(
        "DELETE",
        "/2/jobs/{job_id}",
        jobs.delete_job,
        "cancel a job: [success, message]",
        role=JOBS,
        params=(
            JOB_ID,
            Param("kill", "query", {"type": "integer", "enum": [0, 1]}, "1: SIGKILL a running job"),
        ),
        response={"type": "array", "prefixItems": [{"type": "boolean"}, STR]},
        errors=(400, 404),
    ),
    Route(
        "PUT",
        "/2/jobs/{job_id}/priority",
        jobs.put_job_priority,
        "change the priority of a queued or running job's pending opcodes (luxid's "
        "change_job_priority); the job id (409 if it has none pending)",
        role=JOBS,
        params=(JOB_ID,),
        body=ref("PriorityBody"),
        response=INT,
        errors=(400, 404, 409),
    ),
    Route(
        "GET",
        "/2/jobs/{job_id}/why",
        jobs.get_job_why,
        "why the job is not running: the chain of what holds it (docs/contracts.md)",
        params=(JOB_ID,),
        response=ref("WhyJob"),
        errors=(400, 404, 504),
    ),
    Route(
        "GET",
        "/2/events",
        events.get_events,
        "both daemons' events as Server-Sent Events, each `data:` one Event, each `id:` a "
        "cursor to send back as Last-Event-ID (docs/contracts.md#events)",
        params=(TOPICS,),
        response=ref("Event"),
        errors=(400,),
        media_type="text/event-stream",
    ),
    Route(
        "GET",
        "/2/jobs/{job_id}/wait",
        jobs.wait_job,
        "wait up to 10 s for a job to change (JSON body); null if it did not",
        params=(JOB_ID,),
        body=ref("WaitBody"),
        response=ref("JobChange"),
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/2/filters",
        jobs.get_filters,
        "filter rules (bulk=1: full objects)",
        params=(BULK,),
        response={"type": "array", "items": {"oneOf": [ref("UuidUri"), ref("Filter")]}},
        errors=(400,),
    ),
    Route(
        "POST",
        "/2/filters",
        jobs.add_filter,
        "add a filter rule; its uuid",
        role=FILTERS,
        body=ref("FilterBody"),
        response=STR,
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/filters/{uuid}",
        jobs.get_filter,
        "one filter rule",
        params=(UUID,),
        response=ref("Filter"),
        errors=(404,),
    ),
    Route(
        "PUT",
        "/2/filters/{uuid}",
        jobs.replace_filter,
        "replace (or create) a filter rule; its uuid",
        role=FILTERS,
        params=(UUID,),
        body=ref("FilterBody"),
        response=STR,
        errors=(400,),
    ),
    Route(
        "DELETE",
        "/2/filters/{uuid}",
        jobs.delete_filter,
        "delete a filter rule",
        role=FILTERS,
        params=(UUID,),
        response={"type": "null"},
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/2/budgets",
        budgets.get_budgets,
        "disruption budgets (bulk=1: their rows)",
        params=(BULK,),
        response=list_of("IdUri", "BudgetRow"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/budgets/{name}",
        budgets.get_budget,
        "one disruption budget: members, disrupted members, events",
        params=(NAME,),
        response=ref("BudgetRow"),
        errors=(404,),
    ),
    Route(
        "PUT",
        "/2/budgets/{name}",
        budgets.put_budget,
        "add or replace a disruption budget; its row",
        role=DRAINS,
        params=(NAME,),
        body=ref("BudgetBody"),
        response=ref("BudgetRow"),
        errors=(400,),
    ),
    Route(
        "DELETE",
        "/2/budgets/{name}",
        budgets.delete_budget,
        "delete a disruption budget",
        role=DRAINS,
        params=(NAME,),
        response={"type": "null"},
        errors=(404,),
    ),
    Route(
        "POST",
        "/2/tokens",
        tokens.post_token,
        "make a bearer token for a user (its roles at most the user's); the token, shown "
        "once, and its id",
        role=ADMIN,
        body=ref("TokenBody"),
        response=ref("NewToken"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/audit",
        audit.get_audit,
        "the audit log: both daemons' entries and lw-rapi's own (RAPI user and token "
        "changes), merged by time, newest last (docs/contracts.md#audit-log)",
        role=AUDIT,
        params=(
            Param("since", "query", NUM, "epoch seconds: entries with ts >= since"),
            Param("until", "query", NUM, "epoch seconds: entries with ts < until"),
            Param("actor", "query", STR, "only this actor (rapi:alice, cli:root, job:42)"),
            Param("target", "query", STR, "only this target (instance/web1, job/42)"),
            Param(
                "limit",
                "query",
                {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
                "the newest this many",
            ),
        ),
        response={"type": "array", "items": ref("AuditEntry")},
        errors=(400,),
    ),
)

# How each typed daemon error is answered.
RPC_STATUS: dict[type[errors.RpcError], int] = {
    errors.NotFound: 404,
    errors.InvalidParams: 400,
    errors.FilterError: 400,
    errors.InvalidOpcode: 400,
    errors.ConfigValidationError: 400,
    errors.AlreadyExists: 409,
    errors.QueueDrained: 503,
    errors.ConnectionError: 502,
    errors.Timeout: 504,
}
