"""etcd answers that lost acknowledged writes: the warning for releases that can (3.5.0-3.5.2,
etcd-io/etcd#13766), and the refusal when a new term's load finds less than this node had."""

from __future__ import annotations

import logging

from client._server.etcd.client import EtcdClient
from client.errors import StorageError
from client.etcd_binary import crash_unsafe, parse_release

log = logging.getLogger(__name__)


async def warn_if_crash_unsafe(client: EtcdClient) -> bool:
    """Log a warning (and return True) when the member answering runs etcd 3.5.0-3.5.2,
    whose members can come back from a kill -9 without writes the cluster acknowledged
    (etcd-io/etcd#13766); EtcdError when no member answers."""
    answer = await client.status()
    if not crash_unsafe(parse_release(answer.version)):
        return False
    log.warning(
        "etcd %s can lose acknowledged writes on a member that is killed and restarted "
        "(etcd-io/etcd#13766): upgrade the etcd cluster to 3.5.3 or later",
        answer.version,
    )
    return True


def lost_data(prefix: str, found: str, had: str) -> StorageError:
    """The refusal to serve a load that has less than this node already had committed:
    `found` and `had` say what ("job ids up to 3", "job 5")."""
    return StorageError(
        f"etcd answered with {found} under {prefix}, but this node already had {had} "
        "committed: the etcd member answering has lost data (etcd-io/etcd#13766?); refusing "
        "to serve it until etcd answers with the acknowledged state"
    )
