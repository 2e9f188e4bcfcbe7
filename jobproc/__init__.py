"""jobproc: the per-job worker process and the opcode library.

Its contracts: docs/contracts.md#job-processes-and-opcodes.
"""
