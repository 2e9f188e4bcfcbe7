"""The server toolkit, internal to Lockwarden's daemons: never part of the client API.

wconfd, luxid and lw-rapi share it: the socket server and the dispatch derived from the
API declarations, peer credentials, process watching, sd_notify, the daemon runner, the
role check, the metric registry, and the etcd v3 client with leader election and fenced
writes (`client._server.etcd`).  It lives inside `client` only because the import names
are fixed to five packages (client, wconfd, luxid, jobproc, rapi) and every daemon needs
it; the leading underscore says it is internal.

The rule, enforced by tests/unit/test_dependency_rule.py: code a client runs (stubs, CLI,
the public modules of `client`) never imports `client._server`, and `client._server`
imports no daemon (wconfd, luxid, jobproc, rapi), only the public modules of `client`.
"""
