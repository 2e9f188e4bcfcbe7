"""The OpenAPI 3.1 document of the RAPI, derived from the route table (`rapi.routes`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from client import __version__
from rapi.routing import Route
from rapi.schemas import SCHEMAS

_ERROR = {"$ref": "#/components/schemas/Error"}
_REASONS = {
    400: "malformed request (parameters or body)",
    401: "no, malformed or wrong credentials",
    403: "the user or token lacks the role (explain: needs role R), or a write from another origin",
    404: "no such object",
    409: "already exists, or (a job's priority) nothing is pending",
    415: "a write without Content-Type: application/json",
    429: "too many failed logins for this user name or address (see Retry-After)",
    502: "a daemon (wconfd, luxid) is unreachable",
    501: "luxid does not serve this (it predates drains)",
    503: "the queue is drained",
}
OPENAPI_PATH = "/openapi.json"


def _operation_id(route: Route) -> str:
    words = [w.strip("{}") for w in route.path.strip("/").split("/") if w]
    return "_".join([route.method.lower(), *words]).replace(".", "_").replace("-", "_")


def _error(code: int) -> dict[str, Any]:
    return {
        "description": _REASONS.get(code, "error"),
        "content": {"application/json": {"schema": _ERROR}},
    }


def _operation(route: Route) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": _operation_id(route),
        "responses": {
            "200": {
                "description": "OK",
                "content": {route.media_type: {"schema": route.response}},
            }
        },
    }
    if route.params:
        op["parameters"] = [
            {
                "name": p.name,
                "in": p.where,
                "required": p.where == "path",
                "description": p.description,
                "schema": p.schema,
            }
            for p in route.params
        ]
    if route.body is not None:
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": route.body}},
        }
    codes = set(route.errors)
    if route.public:
        op["security"] = []
    else:
        codes |= {401, 429, 502}
        if route.role is not None:
            codes |= {403}
            op["x-lockwarden-role"] = route.role
        op["x-lockwarden-access"] = "read" if route.method == "GET" else "write"
    if route.method in ("POST", "PUT", "DELETE"):
        codes |= {403, 415}
    for code in sorted(codes):
        op["responses"][str(code)] = _error(code)
    return op


def document(routes: Iterable[Route]) -> dict[str, Any]:
    """The OpenAPI document describing every resource of `routes` and itself."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    paths[OPENAPI_PATH] = {
        "get": {
            "summary": "this document",
            "operationId": "get_openapi",
            "security": [],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Lockwarden remote API",
            "version": __version__,
            "description": "Ganeti-compatible RAPI (version 2) for Lockwarden's job queue, filters "
            "and cluster objects. Reads need a valid user (HTTP Basic) unless lw-rapi runs with "
            "--allow-anonymous-read; writes need a user with the write right. Errors carry "
            "Ganeti's body {code, message, explain}.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "lwt_"},
            },
        },
        "security": [{"basic": []}, {"bearer": []}],
    }
