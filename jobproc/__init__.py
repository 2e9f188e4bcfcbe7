"""jobproc: the per-job worker process and the opcode library (SPEC §7)."""
