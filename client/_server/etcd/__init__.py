"""etcd v3 support for both daemons (docs/architecture.md#storage): client, leader election,
fenced writes.

wconfd and luxid both keep their state in etcd when started with `--store etcd://…`, both
need the same client and the same fencing rule, and wconfd's leader election decides the role
of both; so the code lives here, in the server toolkit both share (`client._server`), not in
either daemon. Client code (stubs, CLI, rapi) never imports it.

Modules:

- `wire`     — msgspec shapes of etcd's v3 JSON gateway (base64 bytes, int64 as strings).
- `errors`   — its failures, each a `client.errors.StorageError` on the wire.
- `client`   — `EtcdClient`: asyncio over aiohttp, several endpoints with fail-over.
- `batching` — pure packing of changes into transactions within etcd's limits (group commit).
- `fencing`  — `FencedWriter`: changes committed exactly once, guarded by the leader token.
- `election` — the pure decisions of leader election (when to renew, when to step down).
- `leader`   — `LeaderElection`: the shell that campaigns, renews, resigns and watches.
- `background` — the task-and-release skeleton the two lease holders below share.
- `presence` — each node's key under `<prefix>/nodes/`, so any node can list them all.
- `url`      — parsing of `etcd[s]://HOST:PORT[,HOST:PORT…][/PREFIX]`, joined with the
  `--etcd-*` options (`client.etcd_security`, public: `lw` takes them too).
- `tls`      — the client's SSL context; which failed handshakes are refusals.
- `auth`     — etcd's users: the token, sent with every call and renewed when it expires.
"""
