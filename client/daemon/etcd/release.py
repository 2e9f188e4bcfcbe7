"""A warning for operators whose etcd release can lose acknowledged writes in a crash."""

from __future__ import annotations

import logging

from client.daemon.etcd.client import EtcdClient
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
