"""The `lw` drain commands (SPEC §12.4) as a subprocess against the real daemons.

`lw queue drain` alone is the drain flag, and `--message`/`--wait` without `--soft` or
`--deadline` are usage errors that change nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_cli import Lw
from test_drains_node import stack as stack  # the fixture: wconfd + luxid

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def lw(stack: Stack) -> Lw:
    return Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)


def test_lw_queue_drain_alone_is_the_flag_and_message_or_wait_need_a_queue_drain(
    stack: Stack, lw: Lw
) -> None:
    lw.ok("queue", "drain")
    info = stack.lc.query_queue_info()
    assert info.drained is True and info.queue_drain is None and info.filters == 0
    lw.ok("queue", "undrain")
    assert stack.lc.query_queue_info().drained is False
    for extra, named in [
        (["--message", "upgrade"], "--message needs"),
        (["--wait"], "--wait needs"),
        (["--message", "upgrade", "--wait"], "--message and --wait need"),
    ]:
        err = lw.fails(2, "queue", "drain", *extra)
        assert f"lw queue drain: error: {named} --soft or --deadline" in err, err
        assert "drain flag, which has no message and nothing to wait for" in err
    info = stack.lc.query_queue_info()  # nothing was started nor set
    assert info.drained is False and info.queue_drain is None and info.filters == 0
    assert stack.lc.query_drains() == []
    usage = " ".join(lw.ok("queue", "drain", "--help").split())
    assert "Without --soft and --deadline: set the drain flag" in usage
    assert "--message and --wait need --soft or --deadline" in usage
    # with --deadline the message goes into the rule's reason (a hard queue drain)
    out = lw.ok("queue", "drain", "--deadline", "15m", "--message", "upgrade")
    assert "queue drain (hard): new jobs are refused" in out
    ((_, _, _, _, action, reason),) = stack.lc.query_filters(uuids=None, fields=None)
    assert action == "REJECT" and reason[0][:2] == ["lw:drain", "upgrade"]
    assert stack.lc.query_queue_info().drained is False  # the flag is another thing
