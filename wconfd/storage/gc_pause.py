"""`gc_paused`: build a large state without the cyclic garbage collector running meanwhile.

Loading 100,000 instances creates millions of objects; every few hundred allocations the
collector runs, and its older generations are traversed again and again as they grow.  At
that size the collector took more than half of decoding the journal
(docs/contracts.md#performance-targets).  Reference counting still frees everything that is
not cyclic while it is paused; afterwards the loaded objects are frozen (moved out of the
collector's generations, `gc.freeze`), so later collections skip the long-lived state too.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (back on after, if it was), and what was
    built frozen out of its reach."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
