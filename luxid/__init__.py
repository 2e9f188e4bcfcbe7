"""luxid: the job-queue daemon — store, scheduler, filters, process supervision.

Its contracts: docs/contracts.md#jobs.
"""
