"""The `lw` command line."""
