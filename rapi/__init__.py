"""rapi: the HTTP remote API daemon, a client of luxid and wconfd (docs/contracts.md#rapi-paths)."""
