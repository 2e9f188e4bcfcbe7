"""wconfd's reservation methods (docs/contracts.md#temporary-reservations): the shell around
ReservationTable.

Reservations are planned writes like config writes (Persistence.submit): planned in
order, durable before they are visible or answered.
"""

from __future__ import annotations

from typing import Any

from wconfd.clients import Client
from wconfd.durable_state import Record
from wconfd.persistence import Persistence


class ReservationService:
    """The reservation methods over the durable state's reservation table."""

    def __init__(self, persistence: Persistence) -> None:
        self.persistence = persistence

    async def reserve(self, client: Client, namespace: str, value: str) -> None:
        state = self.persistence.state
        await self.persistence.submit(
            lambda now: (
                state.reservations.reserve(
                    client.client_id, namespace, value, in_config=state.config.mac_in_use
                ),
                None,
            )
        )

    async def release_reservation(self, client: Client, namespace: str, value: str) -> None:
        table = self.persistence.state.reservations
        await self.persistence.submit(
            lambda now: (table.release_reservation(client.client_id, namespace, value), None)
        )

    async def release_reservations(self, client: Client, namespace: str | None) -> None:
        await self.drop_reservations(client.client_id, namespace)

    async def drop_reservations(self, owner: str, namespace: str | None = None) -> None:
        """Release `owner`'s reservations (of one namespace, or all)."""
        table = self.persistence.state.reservations
        await self.persistence.submit(
            lambda now: (table.release_reservations(owner, namespace), None)
        )

    async def generate_mac(self, client: Client) -> str:
        state = self.persistence.state

        def plan(now: float) -> tuple[Record | None, Any]:
            mac, record = state.reservations.generate_mac(
                client.client_id, state.config.cluster.mac_prefix, in_config=state.config.mac_in_use
            )
            return record, mac

        result: str = await self.persistence.submit(plan)
        return result

    async def list_reservations(self, client: Client) -> list[tuple[str, str, str]]:
        rows = self.persistence.state.reservations.list_reservations()
        return [(o, ns, v) for o, ns, v in rows]

    def holds_any(self, owner: str) -> bool:
        """Whether `owner` holds a reservation."""
        return self.persistence.state.reservations.count(owner) > 0
