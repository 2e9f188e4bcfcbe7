"""Fixtures for the opcode tests: a small cluster in a fake context."""

from __future__ import annotations

import pytest

from .fakes import FakeContext


@pytest.fixture
def ctx() -> FakeContext:
    """Four nodes (n3 drained, n4 offline) and three instances.

    Load (MiB of primary instances): n1 2048 (i1, i2), n2 512 (i3 with secondary n1).
    """
    c = FakeContext()
    c.node("n1", primary_ip="192.0.2.1")
    c.node("n2", primary_ip="192.0.2.2")
    c.node("n3", drained=True)
    c.node("n4", offline=True)
    c.instance("i1", "n1", memory=1024)
    c.instance("i2", "n1", memory=1024)
    c.instance("i3", "n2", memory=512, secondaries=("n1",))
    return c
