"""Exceptions raised while an opcode runs: user-caused failures and cancellation.

Kept free of imports so that the registry (imported by luxid) stays cheap.
"""

from __future__ import annotations

# Error codes in the spirit of Ganeti's ECODE_*: what kind of mistake the user made.
ECODE_NOENT = "noent"  # an object named in the opcode does not exist
ECODE_EXISTS = "exists"  # an object to create already exists
ECODE_STATE = "state"  # an object is in the wrong state (node offline, has instances...)
ECODE_INVAL = "inval"  # a parameter combination the config makes invalid
ECODE_NORES = "nores"  # no resource (node) available


class OpExecError(Exception):
    """An opcode failed for a reason the user can understand and fix.

    The message says what was wrong (``"node 'n9' not found"``); `ecode` classifies it.
    The job process records the opcode as `error` with this message as its result.
    """

    def __init__(self, message: str, ecode: str = ECODE_STATE) -> None:
        super().__init__(message)
        self.message = message
        self.ecode = ecode

    def __str__(self) -> str:
        return self.message


class OpPrereqError(OpExecError):
    """A prerequisite of the opcode does not hold (as Ganeti's OpPrereqError): checked
    before anything changed, e.g. no node has room for an instance
    (docs/contracts.md#room-on-nodes)."""


class Canceled(BaseException):
    """The job was canceled while the opcode waited at an interruptible point.

    Raised by `OpContext.sleep` (and by the job process's lock waits).  It derives from
    BaseException, like asyncio.CancelledError, so that an opcode's `except Exception`
    cannot swallow a cancellation by accident.
    """
