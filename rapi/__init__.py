"""rapi: the HTTP remote API daemon, a client of luxid and wconfd (SPEC §8.2)."""
