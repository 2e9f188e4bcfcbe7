"""Fenced, exactly-once writes: every write of the master is guarded by its leader token.

The token is the create revision of the leader key the master holds. Each transaction
compares `create_revision(leader key) == token` besides its own conditions, so a master that
was deposed (its lease lapsed while it hung, another node took the key) writes nothing,
whatever it still believes.

A write whose answer is lost (a member died mid-call) may or may not have committed, and may
even commit later. So that it can be sent again without ever applying twice, each writer
chains its transactions through a *commit marker* key of its own: every transaction also
requires `mod_revision(marker) == the revision of the writer's previous transaction` and
puts a fresh id into the marker. Of two copies of one transaction at most one can commit;
reading the marker tells whether one did.

When a transaction fails, its failure branch reads the leader key and the marker, which
tells a lost fence (`Fenced`: turn standby), an earlier copy that committed (success), and a
failed condition of the change itself (`CompareFailed`: the caller's optimistic concurrency).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from client._server.etcd.batching import MAX_TXN_BYTES, MAX_TXN_OPS, Change, pack
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import CompareFailed, EtcdError, Fenced, OutcomeUnknown
from client._server.etcd.wire import (
    Compare,
    KeyValue,
    RequestOp,
    TxnResponse,
    cmp_create,
    cmp_mod,
    op_put,
    op_range,
)

log = logging.getLogger(__name__)

# One more operation per transaction, given the index of its last change.
Trailer = Callable[[int], RequestOp]

# One send of a transaction waits at most SEND_TIMEOUT for its answer, then the same
# transaction goes to the next member: a proposal that went to a leader which just died is
# lost, and waiting longer for it would only spend the call's budget. Sends go on while
# MIN_SEND_TIME of the budget (the client's timeout) is left, SEND_ATTEMPTS at most.
SEND_TIMEOUT = 1.5
SEND_ATTEMPTS = 8
MIN_SEND_TIME = 0.1


class FencedWriter:
    """Commits changes for the holder of `leader_key` with create revision `token`.

    `name` tells apart the writers of one node (wconfd's and luxid's): each has its own
    commit marker, `<leader_key>.commit.<name>`. Transactions of one writer are sent one at
    a time (the marker chain orders them); batch with `commit_many` for throughput.
    """

    def __init__(
        self,
        client: EtcdClient,
        leader_key: bytes,
        token: int,
        *,
        name: str = "main",
        max_ops: int = MAX_TXN_OPS,
        max_bytes: int = MAX_TXN_BYTES,
    ) -> None:
        self.client = client
        self.leader_key = leader_key
        self.token = token
        self.marker = leader_key + b".commit." + name.encode()
        self.max_ops = max_ops - 1  # the marker's put travels in every transaction
        self.max_bytes = max_bytes
        self._marker_revision: int | None = None
        self._serial = asyncio.Lock()

    async def commit(self, ops: Sequence[RequestOp], compares: Sequence[Compare] = ()) -> int:
        """Commit one change as one transaction; returns the revision it was committed at.

        Raises `Fenced` if the token is no longer the leader key's, `CompareFailed` if one of
        `compares` does not hold (nothing is written in either case), `ChangeTooLarge`,
        `OutcomeUnknown` if no send got a definite answer within the budget, or another
        `StorageError` from the client.
        """
        (outcome,) = await self.commit_many([Change(tuple(ops), tuple(compares))])
        if isinstance(outcome, EtcdError):
            raise outcome
        return outcome

    async def commit_many(
        self, changes: Sequence[Change], *, trailer: Trailer | None = None
    ) -> list[int | CompareFailed]:
        """Commit changes in order, as few transactions as etcd allows (group commit).

        Each change is atomic; the result per change is its commit revision or the
        `CompareFailed` of its own conditions (the others still commit: one client's bad
        write does not fail another's). `Fenced` or an unavailable etcd raises for the whole
        call; changes of transactions committed before that stay committed, in order.

        `trailer(i)`, if given, is one more operation for each transaction, given the index
        of the transaction's last change: state that sums up the changes before it, such as
        wconfd's config serial_no (`<prefix>/config/meta`). No change may touch its key.
        """
        outcomes: list[int | CompareFailed] = []
        max_ops = self.max_ops - (trailer is not None)
        async with self._serial:
            groups = pack(changes, max_ops=max_ops, max_bytes=self.max_bytes, fixed_compares=2)
            for group in groups:
                members = [changes[i] for i in group]
                try:
                    revision = await self._txn(members, trailer(group[-1]) if trailer else None)
                    outcomes.extend([revision] * len(members))
                except CompareFailed as failed:
                    if len(members) == 1:
                        outcomes.append(failed)
                        continue
                    # Which change's condition failed? Ask each alone, in order.
                    for i in group:
                        try:
                            tail = trailer(i) if trailer else None
                            outcomes.append(await self._txn([changes[i]], tail))
                        except CompareFailed as alone:
                            outcomes.append(alone)
        return outcomes

    async def _txn(self, changes: Sequence[Change], trailer: RequestOp | None) -> int:
        """One transaction: the fence, the marker, the changes' compares and operations."""
        if self._marker_revision is None:
            kv = await self.client.get(self.marker)
            self._marker_revision = kv.mod_revision if kv else 0
        commit_id = uuid.uuid4().hex.encode()
        ops: list[RequestOp] = [op for change in changes for op in change.ops]
        if trailer is not None:
            ops.append(trailer)
        ops.append(op_put(self.marker, commit_id))
        own = [cmp for change in changes for cmp in change.compares]
        # All sends of one transaction share the client's budget: a call fails in bounded time.
        deadline = time.monotonic() + self.client.timeout
        for attempt in range(1, SEND_ATTEMPTS + 1):
            compares = [
                cmp_create(self.leader_key, self.token),
                cmp_mod(self.marker, self._marker_revision),
                *own,
            ]
            try:
                answer = await self.client.txn(
                    compares,
                    ops,
                    [op_range(self.leader_key), op_range(self.marker)],
                    timeout=max(min(deadline - time.monotonic(), SEND_TIMEOUT), MIN_SEND_TIME),
                )
            except OutcomeUnknown as lost:
                if attempt == SEND_ATTEMPTS or deadline - time.monotonic() < MIN_SEND_TIME:
                    raise
                # The client has moved on to another member: send the same again.
                log.warning("sending a transaction again: %s", lost.message)
                continue
            if answer.succeeded:
                self._marker_revision = answer.header.revision
                return answer.header.revision
            holder, marker = _read(answer, 0), _read(answer, 1)
            if marker is not None and marker.value == commit_id:
                # An earlier copy of this very transaction committed (its answer was lost).
                self._marker_revision = marker.mod_revision
                return marker.mod_revision
            if holder is None or holder.create_revision != self.token:
                raise self._fenced(holder)
            current = marker.mod_revision if marker else 0
            if current == self._marker_revision:
                raise CompareFailed(
                    f"a condition of the transaction no longer holds (at revision "
                    f"{answer.header.revision}); nothing was written: read the keys again"
                )
            # A transaction of ours whose answer was lost earlier committed after all.
            self._marker_revision = current
        raise OutcomeUnknown(
            f"etcd transaction sent {SEND_ATTEMPTS} times without a definite outcome (answers "
            "lost, or earlier lost transactions of this writer committing meanwhile); it may "
            "still commit: read the keys again"
        )

    def _fenced(self, holder: KeyValue | None) -> Fenced:
        now = "free"
        if holder is not None:
            name = holder.value.decode(errors="replace")
            now = f"held by {name!r} since revision {holder.create_revision}"
        return Fenced(
            f"this node no longer holds the leader key (its term {self.token} ended; the key "
            f"is {now}); nothing was written: stop serving and turn standby"
        )


def _read(answer: TxnResponse, index: int) -> KeyValue | None:
    """The key read by the failure branch's `index`th range, if it exists."""
    if index >= len(answer.responses):
        return None
    read = answer.responses[index].response_range
    return read.kvs[0] if read is not None and read.kvs else None
