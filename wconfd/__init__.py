"""wconfd: the configuration and lock daemon.

Its contracts: docs/contracts.md#locks and docs/contracts.md#configuration.
"""
