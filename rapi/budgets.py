"""The disruption budgets over the RAPI (docs/contracts.md#disruption-budgets):
`GET /2/budgets` (`[{"id", "uri"}]`, `?bulk=1` the rows), `GET|PUT|DELETE
/2/budgets/<name>`; PUT takes `{"tags": [...], "max_disrupted": n}`, the name from the
path.  luxid judges the values (InvalidParams is 400, NotFound 404)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from rapi.routing import HttpError, Request, body_params, bulk, uri_list

BUDGET_BODY_PARAMS: Final = ("tags", "max_disrupted")


def _rows(rows: list[Any]) -> list[dict[str, Any]]:
    return [msgspec.to_builtins(row) for row in rows]


async def get_budgets(req: Request) -> list[dict[str, Any]]:
    """Budget names and URIs, or (bulk) the budgets' rows."""
    rows = _rows(await req.backend.luxi.query_budgets())
    if bulk(req):
        return rows
    return uri_list([row["name"] for row in rows], "/2/budgets/%s", "id")


async def get_budget(req: Request) -> dict[str, Any]:
    """One budget's row."""
    name = req.match["name"]
    for row in _rows(await req.backend.luxi.query_budgets()):
        if row["name"] == name:
            return row
    raise HttpError(404, f"budget {name} not found")


async def put_budget(req: Request) -> dict[str, Any]:
    """Add or replace a budget; its row."""
    data = body_params(req, BUDGET_BODY_PARAMS, "a budget")
    for param in BUDGET_BODY_PARAMS:
        if param not in data:
            raise HttpError(
                400, f"Required parameter '{param}' is missing: send "
                '{"tags": ["web"], "max_disrupted": 1}'
            )  # fmt: skip
    row = await req.backend.luxi.set_budget(
        name=req.match["name"],
        tags=data["tags"],
        max_disrupted=data["max_disrupted"],
    )
    result: dict[str, Any] = msgspec.to_builtins(row)
    return result


async def delete_budget(req: Request) -> None:
    """Delete a budget."""
    await req.backend.luxi.delete_budget(name=req.match["name"])
