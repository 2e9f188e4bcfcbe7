"""wconfd: the configuration and lock daemon (SPEC §4, §5)."""
