"""Fenced writes: every write of the master is guarded by its leader token (SPEC §13).

The token is the create revision of the leader key the master holds. Each transaction
compares `create_revision(leader key) == token` besides its own conditions, so a master that
was deposed (its lease lapsed while it hung, another node took the key) writes nothing,
whatever it still believes. When a transaction fails, its failure branch reads the leader
key, which tells a lost fence (`Fenced`: turn standby) from a failed condition of the change
itself (`CompareFailed`: the caller's optimistic concurrency).
"""

from __future__ import annotations

from collections.abc import Sequence

from client.daemon.etcd.batching import MAX_TXN_BYTES, MAX_TXN_OPS, Change, pack
from client.daemon.etcd.client import EtcdClient
from client.daemon.etcd.errors import CompareFailed, EtcdError, Fenced
from client.daemon.etcd.wire import Compare, RequestOp, TxnResponse, cmp_create, op_range


class FencedWriter:
    """Commits changes for the holder of `leader_key` with create revision `token`."""

    def __init__(
        self,
        client: EtcdClient,
        leader_key: bytes,
        token: int,
        *,
        max_ops: int = MAX_TXN_OPS,
        max_bytes: int = MAX_TXN_BYTES,
    ) -> None:
        self.client = client
        self.leader_key = leader_key
        self.token = token
        self.max_ops = max_ops
        self.max_bytes = max_bytes

    async def commit(self, ops: Sequence[RequestOp], compares: Sequence[Compare] = ()) -> int:
        """Commit one change as one transaction; returns the revision it was committed at.

        Raises `Fenced` if the token is no longer the leader key's, `CompareFailed` if one of
        `compares` does not hold (nothing is written in either case), `ChangeTooLarge`, or
        another `StorageError` from the client.
        """
        (outcome,) = await self.commit_many([Change(tuple(ops), tuple(compares))])
        if isinstance(outcome, EtcdError):
            raise outcome
        return outcome

    async def commit_many(self, changes: Sequence[Change]) -> list[int | CompareFailed]:
        """Commit changes in order, as few transactions as etcd allows (group commit).

        Each change is atomic; the result per change is its commit revision or the
        `CompareFailed` of its own conditions (the others still commit: one client's bad
        write does not fail another's). `Fenced` or an unavailable etcd raises for the whole
        call; changes of transactions committed before that stay committed, in order.
        """
        outcomes: list[int | CompareFailed] = []
        for group in pack(changes, max_ops=self.max_ops, max_bytes=self.max_bytes):
            members = [changes[i] for i in group]
            try:
                revision = await self._txn(members)
            except CompareFailed as failed:
                if len(members) == 1:
                    outcomes.append(failed)
                    continue
                # Which change's condition failed? Ask each alone, in order.
                for change in members:
                    try:
                        outcomes.append(await self._txn([change]))
                    except CompareFailed as alone:
                        outcomes.append(alone)
                continue
            outcomes.extend([revision] * len(members))
        return outcomes

    async def _txn(self, changes: Sequence[Change]) -> int:
        """One transaction: the fence, the changes' compares, then all their operations."""
        compares = [cmp_create(self.leader_key, self.token)]
        ops: list[RequestOp] = []
        for change in changes:
            compares.extend(change.compares)
            ops.extend(change.ops)
        answer = await self.client.txn(compares, ops, [op_range(self.leader_key)])
        if answer.succeeded:
            return answer.header.revision
        raise self._why_failed(answer)

    def _why_failed(self, answer: TxnResponse) -> EtcdError:
        """The failure branch read the leader key: is the fence or the change's own compare at fault?"""
        read = answer.responses[0].response_range if answer.responses else None
        holder = read.kvs[0] if read is not None and read.kvs else None
        if holder is None or holder.create_revision != self.token:
            now = "free"
            if holder is not None:
                name = holder.value.decode(errors="replace")
                now = f"held by {name!r} since revision {holder.create_revision}"
            return Fenced(
                f"this node no longer holds the leader key (its term {self.token} ended; the key "
                f"is {now}); nothing was written: stop serving and turn standby"
            )
        return CompareFailed(
            f"a condition of the transaction no longer holds (at revision {answer.header.revision}); "
            "nothing was written: read the keys again"
        )
