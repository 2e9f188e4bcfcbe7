"""luxid: the job-queue daemon — store, scheduler, filters, process supervision (SPEC §6)."""
