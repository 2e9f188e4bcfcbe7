"""etcd's known faults: the warning at start for a release that has one (client.etcd_binary's
KNOWN_FAULTS), and the refusal when a new term's load finds less than this node had (the
answering member lost acknowledged writes: etcd-io/etcd#13766)."""

from __future__ import annotations

import logging

from client._server.etcd.client import EtcdClient
from client.errors import StorageError
from client.etcd_binary import known_faults, parse_release

log = logging.getLogger(__name__)


async def warn_of_known_faults(client: EtcdClient) -> list[str]:
    """Log a warning for each known fault of the release the answering member runs; the
    faults' issue names.  EtcdError when no member answers."""
    answer = await client.status()
    faults = known_faults(parse_release(answer.version))
    for fault in faults:
        log.warning(
            "etcd %s %s (%s): upgrade the etcd cluster to %s or later",
            answer.version,
            fault.harm,
            fault.issue,
            fault.fixed_in,
        )
    return [fault.issue for fault in faults]


def lost_data(prefix: str, found: str, had: str) -> StorageError:
    """The refusal to serve a load that has less than this node already had committed:
    `found` and `had` say what ("job ids up to 3", "job 5")."""
    return StorageError(
        f"etcd answered with {found} under {prefix}, but this node already had {had} "
        "committed: the etcd member answering has lost data (etcd-io/etcd#13766?); refusing "
        "to serve it until etcd answers with the acknowledged state"
    )
