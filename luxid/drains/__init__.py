"""Drains with deadlines (docs/contracts.md#drains): the pure core, with no I/O and no
clocks.

luxid's shell keeps the drain records (wconfd's `drains`), builds a `ClusterView` from the
configuration, gathers the facts of the drains' jobs, and runs the core on every event
that may matter; the core returns new records and `effects` for the shell to apply.

- `record`: the stored record, its events (the last 1,000).
- `view`: the cluster as placement sees it; `capacity_key`; the `Placement` contract.
- `node`: start/update and cancel a node drain, record submitted and re-found jobs.
- `moves`: the decision pass over the node drains (`step`).
- `queue_drain`: the queue drain (start, `filter_set`, `step`, `undrain_queue`).
- `progress`: job status changes into record state and events.
- `status`: `DrainStatus` for `query_drains` and friends.
- `schedule`: scheduled drains (`start_due`: a drain whose start time came starts).
- `plan`: the dry run of a node drain (`plan_node_drain`), on the drain's own planner.
- `timers`: the deadline heap (deadlines and scheduled starts).
- `effects`: what the shell is asked to do.

How the shell runs it (one decision path, event-driven):

1. Inputs of a pass: the records; `view_from_config(config)`, at least as new as the job
   ends it is fed with; `JobFacts` (status, error text) for every id in each record's
   `active`; `now`; the placement of docs/contracts.md#room-on-nodes wrapped to raise
   `NoRoom`.
2. Passes run on: a drain job's status change, a configuration change, an operator call,
   a timer of the `DeadlineHeap` (`next_timer(record)` after every write), and again
   after carrying out effects.  Never on a timer alone.
3. Carry out the effects first (reporting each Submit with `node.record_submitted`, each
   PutFilter with `queue_drain.filter_set`), then write the changed records to wconfd: a crash
   in between leaves jobs the restart re-finds by their `lw:drain-job` reason tag
   (`node.adopt_jobs`), and cancels that are simply sent again.
"""

from luxid.drains import moves, node, queue_drain
from luxid.drains.effects import CancelJob, ChangePriority, DeleteFilter, Effect, PutFilter, Submit
from luxid.drains.progress import JobFacts
from luxid.drains.record import QUEUE_TARGET, DrainRecord, events_since, node_target
from luxid.drains.status import drain_status
from luxid.drains.timers import DeadlineHeap, next_timer
from luxid.drains.view import ClusterView, NoRoom, Placement, capacity_key, view_from_config

__all__ = [
    "QUEUE_TARGET",
    "CancelJob",
    "ChangePriority",
    "ClusterView",
    "DeadlineHeap",
    "DeleteFilter",
    "DrainRecord",
    "Effect",
    "JobFacts",
    "NoRoom",
    "Placement",
    "PutFilter",
    "Submit",
    "capacity_key",
    "drain_status",
    "events_since",
    "moves",
    "next_timer",
    "node",
    "node_target",
    "queue_drain",
    "view_from_config",
]
