"""`LeaderElection`: campaign for, hold, renew and give up the leader key.

The shell around `election`: a standby reads `<prefix>/leader`; when it is absent it takes
it with a lease and a create-only transaction (`create_revision == 0`); otherwise it watches
the key (and re-reads it at least every TTL, in case the watch's member hangs) until it is
deleted. The master renews its lease with keepalives (short attempts, member after
member) and steps down when it cannot prove its lease alive (past its deadline by its own
clock, etcd not saying otherwise within `proof_time`), when etcd says the lease is gone,
when a fenced write finds the key taken (`step_down`), or when asked to (`resign`, for
`lw cluster failover`). Every step-down revokes the lease (best effort), so a standby can
take the key at once instead of waiting for it to lapse; a key that still names this node
while it is standby (a revoke that failed, a dead predecessor's) is revoked the same way.
A standby campaigns only while `may_campaign()` says so (wconfd: while its luxid answers).

Callbacks run inside the election's task and must not block: a daemon starts its own task
for slow work (loading state) from `on_elected`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from client._server.etcd.background import Background
from client._server.etcd.client import EtcdClient
from client._server.etcd.election import (
    DEFAULT_TTL,
    Renewal,
    Term,
    after_keepalive,
    attempt_timeout,
    must_step_down,
    next_wake,
    proof_time,
)
from client._server.etcd.errors import EtcdError, Fenced
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.wire import Event, KeyValue, cmp_create, op_put, op_range

log = logging.getLogger(__name__)


class LeaderElection(Background):
    """One node's candidacy; `start()` runs it until `stop()`."""

    def __init__(
        self,
        client: EtcdClient,
        *,
        prefix: str,
        node: str,
        ttl: float = DEFAULT_TTL,
        on_elected: Callable[[Term], None] | None = None,
        on_deposed: Callable[[str], None] | None = None,
        may_campaign: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(f"leader-election-{node}")
        self.client = client
        self.node = node
        self.ttl = ttl
        self.key = f"{prefix.rstrip('/')}/leader".encode()
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self.may_campaign = may_campaign
        self.clock = clock
        self.term: Term | None = None
        self.master: str | None = None  # last known master (this node's name while master)
        self.master_term = 0  # the last known master's term (its key's create revision)
        self._known_revision = 0  # the etcd revision `master` was learnt at
        self._renewal: Renewal | None = None
        self._renew_failed = False
        self._campaign_after = 0.0
        self._wakeup = asyncio.Event()
        self._writers: dict[str, FencedWriter] = {}
        self._revokes: set[asyncio.Task[None]] = set()
        self._attempt = attempt_timeout(ttl, len(client.endpoints))

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    def holds_lease(self) -> bool:
        """Master, and the lease is alive by this node's own clock (with the safety
        margin): false from the deadline on until etcd proves the lease alive again."""
        renewal = self._renewal
        return (
            self.term is not None
            and renewal is not None
            and not must_step_down(renewal, self.clock())
        )

    async def _release(self) -> None:
        """On `stop()`, after the loop: a master gives up its key (as `resign`)."""
        self.step_down("stopped")
        await asyncio.gather(*self._revokes)

    def writer(self, name: str = "main") -> FencedWriter:
        """The writer `name` fenced by the current term (one per name and term, so its
        transactions stay one chain); `Fenced` if this node is not the master."""
        term = self.term
        if term is None:
            raise Fenced(f"node {self.node!r} is not the master (the master is {self.master!r})")
        writer = self._writers.get(name)
        if writer is None or writer.token != term.token:
            writer = self._writers[name] = FencedWriter(
                self.client, self.key, term.token, name=name
            )
        return writer

    async def current_master(self) -> str | None:
        """The master's node name as etcd has it now, or None while there is none."""
        answer = await self.client.range(self.key)
        self._learn(answer.kvs[0] if answer.kvs else None, answer.header.revision)
        return self.master

    def _learn(self, kv: KeyValue | None, revision: int) -> None:
        """Take what a read or a change at `revision` says of the key, unless something
        newer is known (a read's answer may come after a later change) or this node is
        master (it knows its own key)."""
        if revision < self._known_revision or self.term is not None:
            return
        self._known_revision = revision
        self.master = kv.value.decode(errors="replace") if kv is not None else None
        self.master_term = kv.create_revision if kv is not None else 0

    def step_down(self, reason: str, *, pause: float | None = None) -> None:
        """Stop being master now (e.g. a fenced write failed) and revoke the lease in the
        background (best effort); no-op on a standby. This node does not campaign again
        for `pause` seconds (default a third of the TTL), so that a standby wins the key."""
        term = self.term
        if term is None:
            return
        log.warning("node %s steps down as master (term %d): %s", self.node, term.token, reason)
        self._campaign_after = max(
            self._campaign_after, self.clock() + (self.ttl / 3 if pause is None else pause)
        )
        self._revoke_later(term.lease_id)
        self.term = None
        self._renewal = None
        if self.master == self.node:
            self.master = None
        self._wakeup.set()
        if self.on_deposed is not None:
            self.on_deposed(reason)

    def _revoke_later(self, lease_id: int) -> None:
        """Revoke `lease_id` in a task of its own (a step-down must not wait for etcd)."""

        async def revoke() -> None:
            try:
                await self.client.lease_revoke(lease_id)
            except EtcdError as exc:  # then the key goes when the lease lapses
                log.warning("node %s could not revoke its lease: %s", self.node, exc)

        task = asyncio.get_running_loop().create_task(revoke())
        self._revokes.add(task)
        task.add_done_callback(self._revokes.discard)

    async def resign(self, wait: float = 0.0) -> str | None:
        """Give up mastership (`lw cluster failover`): revoke the lease, deleting the key.

        This node does not campaign again for one TTL, so that a standby wins. With `wait`,
        wait up to that many seconds for another node to become master, or until this node
        wins again after its pause (no standby took over in a whole TTL: none is up, and
        waiting longer shows nothing new). Returns the master as last seen (None if none
        yet). If etcd cannot be reached the node has still stepped down, and its key goes
        when the lease lapses.
        """
        term = self.term
        if term is None:
            return await self.current_master()
        self.step_down("resigned", pause=self.ttl)
        await asyncio.gather(*self._revokes)
        deadline = self.clock() + wait
        master = await self.current_master()
        while (
            wait
            and (master is None or (master == self.node and self.term is None))  # or its old key
            and self.clock() < deadline
        ):
            await asyncio.sleep(0.05)
            master = await self.current_master()
        return master

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                if self.term is None:
                    await self._standby_round()
                else:
                    await self._master_round()
            except EtcdError as exc:
                log.warning("leader election of %s: %s", self.node, exc)
                await self._sleep_until(self.clock() + self.ttl / 10)
            except Exception:  # a bug must not end the candidacy; the next round re-checks
                log.exception("leader election of %s failed; going on", self.node)
                await self._sleep_until(self.clock() + self.ttl / 10)

    async def _sleep_until(self, when: float) -> None:
        """Sleep until `when`, or until `step_down`/`resign` wakes the loop."""
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), max(0.0, when - self.clock()))

    async def _standby_round(self) -> None:
        if self.clock() < self._campaign_after:
            await self._sleep_until(self._campaign_after)
            return
        answer = await self.client.range(self.key)
        self._learn(answer.kvs[0] if answer.kvs else None, answer.header.revision)
        if answer.kvs:
            kv = answer.kvs[0]
            if kv.value.decode(errors="replace") == self.node and kv.lease:
                # A lease this node gave up (its revoke failed) or a dead predecessor's:
                # nobody serves it, so let it go now rather than when it lapses.
                log.info("node %s revokes the leader key it no longer serves", self.node)
                await self.client.lease_revoke(kv.lease)
                return
            await self._watch_until_deleted(answer.header.revision + 1)
            return
        if self.may_campaign is not None and not self.may_campaign():
            await self._sleep_until(self.clock() + self.ttl / 10)
            return
        await self._campaign()

    async def _watch_until_deleted(self, revision: int) -> None:
        """Return when the leader key is deleted, or after one TTL (the caller re-reads)."""

        def seen(event: Event) -> bool:
            deleted = event.type == "DELETE"
            self._learn(None if deleted else event.kv, event.kv.mod_revision)
            return deleted

        await self.client.watch_for(self.key, revision, self.ttl, seen)

    async def _campaign(self) -> None:
        sent_at = self.clock()  # the lease starts later, in etcd: judging from here is safe
        lease = await self.client.lease_grant(math.ceil(self.ttl))
        try:
            answer = await self.client.txn(
                [cmp_create(self.key, 0)],
                [op_put(self.key, self.node, lease=lease.ID)],
                [op_range(self.key)],
            )
        except EtcdError:
            # We may or may not hold the key now; without keepalives it lapses by itself.
            with contextlib.suppress(EtcdError):
                await self.client.lease_revoke(lease.ID)
            raise
        if not answer.succeeded:
            with contextlib.suppress(EtcdError):
                await self.client.lease_revoke(lease.ID)
            read = answer.responses[0].response_range if answer.responses else None
            if read is not None and read.kvs:
                self._learn(read.kvs[0], answer.header.revision)
            return
        term = Term(node=self.node, lease_id=lease.ID, token=answer.header.revision)
        await self._become_master(term, Renewal(sent_at, min(self.ttl, float(lease.TTL))))

    async def resume(self) -> bool:
        """Carry on the term of this node's previous run, if its lease is still alive.

        A daemon killed and restarted at once (work rides out such a restart:
        docs/contracts.md#reliability-and-security) finds the leader key naming its own
        node; it renews that lease and serves the same term (same fencing token), so nothing
        that follows the key — its node's luxid and running jobs — sees a change of master.
        Two live daemons never share a node name, so the holder is dead. Call before
        `start()`; False when there is nothing to resume.
        """
        kv = await self.client.get(self.key)
        if kv is None or not kv.lease or kv.value.decode(errors="replace") != self.node:
            return False
        sent_at = self.clock()
        remaining = await self.client.lease_keepalive(kv.lease, timeout=self.ttl)
        renewal = after_keepalive(Renewal(sent_at, self.ttl), sent_at, remaining, self.ttl)
        if renewal is None:
            return False  # lapsed meanwhile: the key is gone, the election decides
        log.info("node %s resumes its term %d from an earlier run", self.node, kv.create_revision)
        await self._become_master(Term(self.node, kv.lease, kv.create_revision), renewal)
        return self.term is not None

    async def _become_master(self, term: Term, renewal: Renewal) -> None:
        """Hold `term` (its key is ours): renew from `renewal` on, and take over."""
        self.term, self._renewal, self._renew_failed = term, renewal, False
        self.master, self.master_term = self.node, term.token
        self._known_revision = max(self._known_revision, term.token)
        log.info("node %s is master (term %d)", self.node, term.token)
        if self.on_elected is not None:
            try:
                self.on_elected(term)
            except Exception:
                log.exception("node %s could not take over; giving the key up", self.node)
                self.step_down("taking over failed")

    async def _master_round(self) -> None:
        term, renewal = self.term, self._renewal
        assert term is not None and renewal is not None
        if must_step_down(renewal, self.clock()):
            await self._prove(term, renewal)
            return
        await self._sleep_until(next_wake(renewal, self.clock(), self._renew_failed))
        if self.term is not term or must_step_down(renewal, self.clock()):
            return  # deposed meanwhile, or paused past the deadline: the next round sees
        sent_at = self.clock()
        try:
            remaining = await self.client.lease_keepalive(
                term.lease_id, timeout=renewal.deadline - sent_at, attempt=self._attempt
            )
        except EtcdError as exc:
            log.warning("node %s could not renew its lease: %s", self.node, exc)
            self._renew_failed = True
            return
        self._renewed(term, renewal, sent_at, remaining)

    async def _prove(self, term: Term, renewal: Renewal) -> None:
        """Past the deadline by this node's clock (it stalled, or etcd did not answer in
        time): master again only if etcd says now that the lease lives, else step down."""
        sent_at = self.clock()
        late = sent_at - renewal.deadline
        try:
            remaining = await self.client.lease_keepalive(
                term.lease_id, timeout=proof_time(self.ttl), attempt=self._attempt
            )
        except EtcdError as exc:
            self.step_down(
                f"could not renew the lease within its {renewal.ttl:g} s TTL "
                f"({late:.1f} s past the deadline; {exc})"
            )
            return
        if self._renewed(term, renewal, sent_at, remaining):
            log.warning(
                "node %s was %.1f s past its lease deadline; etcd says the lease is alive: "
                "master again (term %d)",
                self.node, late, term.token,
            )  # fmt: skip

    def _renewed(self, term: Term, renewal: Renewal, sent_at: float, remaining: int) -> bool:
        """Take a keepalive's answer: True if the lease lives on (the term is kept)."""
        if self.term is not term:
            return False
        renewed = after_keepalive(renewal, sent_at, remaining, self.ttl)
        if renewed is None:
            self.step_down("etcd says the lease has expired")
            return False
        self._renewal = renewed
        self._renew_failed = False
        return True
