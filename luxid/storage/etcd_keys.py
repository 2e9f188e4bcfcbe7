"""luxid's keys in etcd (client/_server/etcd/LAYOUT.md, "luxid") and the changes a job
store transaction becomes: pure code, no I/O.

Under `P/jobs/`: `next_id` (the last allocated id), `live/<id>` (a live Job without its
log), `log/<id>/<serial>` (one log entry with its opcode index), `archive/<id>` (an
archived Job with its log inlined), `gate/<id>/<op>` (the opcode-running gate),
`meta/<key>` (small settings such as `drained`), `master` (the node whose luxid last
served, so a restarted luxid knows whether the jobs are its own or a failed master's),
`events/<term>/<seq>` (one event, docs/contracts.md#events; keys sort in the order written,
since terms only grow).  Ids are zero-padded to 20 digits so keys sort by id.

An event's index is derived from the revision of its write: revision x EVENT_SLOTS + its
place among the events of that revision (in key order) - the same number when written and
when read back on any master, never repeated, since a revision is never reused.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

import msgspec
from msgspec.structs import replace

from client._server.etcd.batching import Change
from client._server.etcd.wire import cmp_create, op_delete, op_put
from client.api.common import Event
from client.errors import StorageError
from client.events import EVENT_SLOTS
from luxid.jobs.model import Job, LogEntry
from luxid.storage.jobdata import strip

_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(Job)
_event_decoder = msgspec.msgpack.Decoder(Event)


class StoredLog(msgspec.Struct, frozen=True, array_like=True):
    """A log entry as stored: which opcode it belongs to, and the entry."""

    op_index: int
    entry: LogEntry


class Gate(msgspec.Struct, frozen=True):
    """Who started an opcode: the gate key's value (its existence is what counts)."""

    node: str
    term: int
    started: float


_log_decoder = msgspec.msgpack.Decoder(StoredLog)


class JobKeys:
    """The key names under one prefix (`P/jobs/...`)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.root = f"{prefix.rstrip('/')}/jobs/".encode()
        self.next_id = self.root + b"next_id"
        self.master = self.root + b"master"
        self.live_prefix = self.root + b"live/"
        self.log_prefix = self.root + b"log/"
        self.archive_prefix = self.root + b"archive/"
        self.gate_prefix = self.root + b"gate/"
        self.meta_prefix = self.root + b"meta/"
        self.events_prefix = self.root + b"events/"

    def event(self, term: int, seq: int) -> bytes:
        """One event's key: written by the master of `term`, its `seq`-th."""
        return self.events_prefix + b"%020d/%020d" % (term, seq)

    def live(self, job_id: int) -> bytes:
        return self.live_prefix + b"%020d" % job_id

    def logs(self, job_id: int) -> bytes:
        """The prefix of one job's log keys."""
        return self.log_prefix + b"%020d/" % job_id

    def log(self, job_id: int, serial: int) -> bytes:
        return self.logs(job_id) + b"%020d" % serial

    def archive(self, job_id: int) -> bytes:
        return self.archive_prefix + b"%020d" % job_id

    def gates(self, job_id: int) -> bytes:
        """The prefix of one job's gate keys."""
        return self.gate_prefix + b"%020d/" % job_id

    def gate(self, job_id: int, op_index: int) -> bytes:
        return self.gates(job_id) + b"%d" % op_index

    def meta(self, key: str) -> bytes:
        return self.meta_prefix + quote(key, safe="").encode()

    @staticmethod
    def id_of(key: bytes, prefix: bytes) -> int:
        """The job id right after `prefix` in `key`."""
        return int(key[len(prefix) : len(prefix) + 20])

    def gate_of(self, key: bytes) -> tuple[int, int]:
        """(job id, opcode index) of a gate key."""
        rest = key[len(self.gate_prefix) :]
        job, _, index = rest.partition(b"/")
        return int(job), int(index)


def encode_job(job: Job) -> bytes:
    return _encoder.encode(job)


def decode_job(key: bytes, data: bytes) -> Job:
    try:
        return _job_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise StorageError(f"etcd key {key!r} holds a corrupt job: {exc}") from exc


def decode_log(key: bytes, data: bytes) -> StoredLog:
    try:
        return _log_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise StorageError(f"etcd key {key!r} holds a corrupt log entry: {exc}") from exc


def started_ops(job: Job) -> list[int]:
    """Indexes of the opcodes that have begun executing (they went `running`)."""
    return [i for i, op in enumerate(job.ops) if op.exec_ts is not None]


def job_change(
    keys: JobKeys, job: Job, logged: int, new_gates: Iterable[int], gate: Gate
) -> Change:
    """One job's write: its live key, its log entries after serial `logged`, and a gate per
    opcode in `new_gates`, each required not to exist yet (an opcode starts at most once)."""
    ops = [op_put(keys.live(job.id), encode_job(strip(job)))]
    for index, op in enumerate(job.ops):
        for entry in op.log:
            if entry.serial > logged:
                value = _encoder.encode(StoredLog(index, entry))
                ops.append(op_put(keys.log(job.id, entry.serial), value))
    compares = []
    for index in new_gates:
        ops.append(op_put(keys.gate(job.id, index), msgspec.json.encode(gate)))
        compares.append(cmp_create(keys.gate(job.id, index), 0))
    return Change(tuple(ops), tuple(compares))


def archive_change(keys: JobKeys, job: Job) -> Change:
    """Archiving one job: its live, log and gate keys go, `archive/<id>` holds it all."""
    return Change(
        (
            op_delete(keys.live(job.id)),
            op_delete(keys.logs(job.id), prefix=True),
            op_delete(keys.gates(job.id), prefix=True),
            op_put(
                keys.archive(job.id), encode_job(replace(job, archived=True, pending_reason=None))
            ),
        )
    )


def event_change(keys: JobKeys, term: int, seq: int, draft: Event) -> Change:
    """Storing one event (not numbered: its index comes from the write's revision)."""
    return Change((op_put(keys.event(term, seq), _encoder.encode(draft)),))


def decode_event(key: bytes, data: bytes) -> Event:
    try:
        return _event_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise StorageError(f"etcd key {key!r} holds a corrupt event: {exc}") from exc


def event_indexes(revisions: Iterable[int]) -> list[int]:
    """The indexes of events written (or read back, in key order) at these revisions:
    revision x EVENT_SLOTS + the event's place among those of its revision."""
    out: list[int] = []
    previous, place = -1, 0
    for revision in revisions:
        place = place + 1 if revision == previous else 0
        previous = revision
        out.append(revision * EVENT_SLOTS + place)
    return out
