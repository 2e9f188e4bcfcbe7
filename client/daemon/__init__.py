"""Daemon toolkit shared by wconfd and luxid: socket server, peer credentials, process watch.

It lives under `client` because the import names are fixed to five packages (SPEC §1) and
both daemons need it; it is the server half of the protocol whose client half is `client`.
Client code never imports it.
"""
