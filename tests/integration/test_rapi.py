"""lw-rapi (docs/contracts.md#rapi-paths) with a real HTTP client against real daemons: every
resource and its Ganeti shape, authentication (401/403/anonymous reads, users file reread),
malformed requests (400 with Ganeti's error body, never a traceback), HTTPS, the OpenAPI document, a
schema-driven fuzz run (schemathesis), and Ganeti's own RAPI client where installed.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

from client.rapi_users import User, format_user, hash_password, parse_roles

pytestmark = pytest.mark.timeout(120)

ADMIN = ("admin", "admin-pw")
READER = ("reader", "reader-pw")
J_FIELDS_BULK = {"id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"}
J_FIELDS = J_FIELDS_BULK | {"oplog", "opresult"}
FILTER_FIELDS = {"uuid", "watermark", "priority", "predicates", "action", "reason_trail"}
_NO_BODY = object()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_users(state_dir: Path, *users: tuple[str, str, bool | str]) -> Path:
    """The users file with these users: (name, password, True for `write`, False for none,
    or a comma-separated list of roles)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "rapi_users"
    lines = [
        format_user(User(name, hash_password(pw), roles_of(roles))) for name, pw, roles in users
    ]
    path.write_text("# test users\n" + "\n".join(lines) + "\n")
    return path


def roles_of(roles: bool | str) -> frozenset[str]:
    if isinstance(roles, bool):
        return frozenset({"write"}) if roles else frozenset()
    return parse_roles(roles)


class Answer:
    """An HTTP answer: status, headers, decoded JSON body (raw text if not JSON)."""

    def __init__(self, status: int, headers: Any, raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw.decode("utf-8", "replace")
        try:
            self.body: Any = json.loads(raw) if raw else None
        except ValueError:
            self.body = self.raw

    def __repr__(self) -> str:
        return f"<{self.status} {self.raw[:300]}>"


class Rapi:
    """An lw-rapi process and an HTTP client for it."""

    def __init__(self, factory: Any, *extra: str, tls: ssl.SSLContext | None = None) -> None:
        self.port = free_port()
        self.tls = tls
        self.daemon = factory("rapi", "--port", str(self.port), "--log-level", "DEBUG", *extra)
        self.daemon.start(wait=False)
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.call("GET", "/version").status == 200:
                    return
            except OSError:
                pass
            if self.daemon.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"lw-rapi did not come up:\n{self.daemon.log()}")
            time.sleep(0.05)

    def call(
        self,
        method: str,
        path: str,
        body: Any = _NO_BODY,
        *,
        user: tuple[str, str] | None = ADMIN,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        data = raw if raw is not None else None if body is _NO_BODY else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if user is not None:
            token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.tls) as resp:
                return Answer(resp.status, resp.headers, resp.read())
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, exc.headers, exc.read())

    def get(self, path: str, **kwargs: Any) -> Any:
        answer = self.call("GET", path, **kwargs)
        assert answer.status == 200, answer
        return answer.body


@pytest.fixture
def stack(daemon_factory: Any) -> Any:
    s = Stack(daemon_factory)
    # ADMIN writes and reads the audit log (the fuzz run covers GET /2/audit too).
    write_users(s.wconfd.state_dir, (*ADMIN, "write,audit"), (*READER, False))
    yield s
    s.close()


@pytest.fixture
def rapi(stack: Any, daemon_factory: Any) -> Rapi:
    return Rapi(daemon_factory)


def assert_error(answer: Answer, status: int, *words: str) -> None:
    """A Ganeti error body with this status; its explanation mentions `words`."""
    assert answer.status == status, answer
    assert set(answer.body) == {"code", "message", "explain"}, answer
    assert answer.body["code"] == status
    for word in words:
        assert word in answer.body["explain"], answer
    assert "Traceback" not in answer.raw


# -- resources ---------------------------------------------------------------------------------


def test_version_info_features_and_openapi(rapi: Rapi) -> None:
    assert rapi.get("/version", user=None) == 2
    assert rapi.get("/2/features") == ["instance-create-reqv1", "node-evac-res1"]
    info = rapi.get("/2/info")
    assert info["name"] == "lockwarden" and info["software_version"]
    assert info["queue"]["drained"] is False

    from rapi.routes import ROUTES

    doc = rapi.get("/openapi.json", user=None)
    assert doc["openapi"].startswith("3.")
    for route in ROUTES:
        assert route.method.lower() in doc["paths"][route.path], route.path
    for path in ("/2/filters", "/2/filters/{uuid}", "/2/jobs", "/2/jobs/{job_id}/wait", "/2/info"):
        assert path in doc["paths"]
    assert doc["components"]["securitySchemes"]["basic"]["scheme"] == "basic"


def test_nodes_and_instances(rapi: Rapi, stack: Any) -> None:
    assert rapi.get("/2/nodes") == [] and rapi.get("/2/instances") == []
    for name in ("n2", "n1"):
        stack.wait_final(stack.submit({"OP_ID": "OP_NODE_ADD", "node_name": name}))
    create = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web", "memory": 256, "vcpus": 1}
    assert (
        stack.wait_final(stack.submit({**create, "disks": [{"size": 100}], "pnode": "n1"}))
        == "success"
    )

    assert rapi.get("/2/nodes") == [
        {"id": "n1", "uri": "/2/nodes/n1"},
        {"id": "n2", "uri": "/2/nodes/n2"},
    ]
    n1, n2 = rapi.get("/2/nodes?bulk=1")
    assert n1["name"] == "n1" and n1["role"] == "R" and n1["pinst_cnt"] == 1
    assert n1["pinst_list"] == ["web"] and n2["pinst_cnt"] == 0
    assert {"offline", "drained", "master_candidate", "pip", "group.uuid", "uuid"} <= set(n1)
    assert rapi.get("/2/nodes/n1") == n1
    assert_error(rapi.call("GET", "/2/nodes/nope"), 404, "nope")

    assert rapi.get("/2/instances") == [{"id": "web", "uri": "/2/instances/web"}]
    (web,) = rapi.get("/2/instances?bulk=1")
    assert web["pnode"] == "n1" and web["disk.sizes"] == [100]
    assert web["beparams"]["memory"] == 256 and web["admin_state"] == "up"
    assert rapi.get("/2/instances/web") == web
    assert_error(rapi.call("GET", "/2/instances/nope"), 404)


def test_jobs(rapi: Rapi, stack: Any) -> None:
    done = stack.submit(delay(0, log_messages=["hi"]))
    stack.wait_final(done)
    running = stack.submit(delay(60))
    stack.wait_op_running(running)

    assert rapi.get("/2/jobs") == [
        {"id": done, "uri": f"/2/jobs/{done}"},
        {"id": running, "uri": f"/2/jobs/{running}"},
    ]
    bulk = rapi.get("/2/jobs?bulk=1")
    assert [j["id"] for j in bulk] == [done, running]
    assert set(bulk[0]) >= J_FIELDS_BULK
    assert bulk[1]["status"] == "running" and bulk[1]["opstatus"] == ["running"]

    job = rapi.get(f"/2/jobs/{done}")
    assert set(job) >= J_FIELDS
    assert job["status"] == "success" and job["summary"] == ["TEST_DELAY(0.0)"]
    assert job["oplog"][0][0][3] == "hi" and job["opresult"] == [None]
    assert_error(rapi.call("GET", "/2/jobs/999"), 404)

    assert rapi.call("DELETE", f"/2/jobs/{running}").body[0] is True
    assert stack.wait_final(running) == "canceled"
    ok, message = rapi.call("DELETE", f"/2/jobs/{done}").body
    assert ok is False and message
    assert rapi.call("DELETE", "/2/jobs/999").status == 404


def test_wait_for_job_change(rapi: Rapi, stack: Any) -> None:
    job = stack.submit(delay(0, log_messages=["one", "two"]))
    stack.wait_final(job)
    body = {"fields": ["status"], "previous_job_info": None, "previous_log_serial": None}
    change = rapi.get(f"/2/jobs/{job}/wait", body=body)
    assert change["job_info"] == ["success"]
    assert [entry[3] for entry in change["log_entries"]] == ["one", "two"]

    # A running job: the GET returns as soon as the job changes (here: canceled).
    running = stack.submit(delay(60))
    stack.wait_op_running(running)
    current = rapi.get(f"/2/jobs/{running}/wait", body={"fields": ["status"]})
    serial = max([e[0] for e in current["log_entries"]], default=0)
    answer: list[Any] = []
    body = {"fields": ["status"], "previous_job_info": ["running"], "previous_log_serial": serial}
    waiter = threading.Thread(
        target=lambda: answer.append(rapi.call("GET", f"/2/jobs/{running}/wait", body))
    )
    waiter.start()
    time.sleep(0.3)
    started = time.monotonic()
    stack.lc.cancel_job(job_id=running)
    waiter.join(15)
    assert time.monotonic() - started < 5
    assert answer[0].status == 200 and answer[0].body["job_info"][0] in ("canceling", "canceled")
    assert_error(rapi.call("GET", "/2/jobs/999/wait", body={"fields": ["status"]}), 404)


@pytest.mark.timeout(60)
def test_wait_answers_null_when_nothing_changes(rapi: Rapi, stack: Any) -> None:
    running = stack.submit(delay(60))
    stack.wait_op_running(running)
    body = {"fields": ["status"], "previous_job_info": ["running"], "previous_log_serial": 10**6}
    started = time.monotonic()
    answer = rapi.call("GET", f"/2/jobs/{running}/wait", body)
    assert answer.status == 200 and answer.body is None and answer.raw == "null"
    assert 9 < time.monotonic() - started < 20  # Ganeti's 10 s
    stack.lc.cancel_job(job_id=running)


def test_filters(rapi: Rapi, stack: Any) -> None:
    body = {
        "priority": 3,
        "predicates": [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
        "action": "REJECT",
        "reason": [["test", "no delays", 1]],
    }
    assert rapi.get("/2/filters") == []
    answer = rapi.call("POST", "/2/filters", body)
    assert answer.status == 200, answer
    uuid = answer.body
    assert isinstance(uuid, str) and len(uuid) == 36
    assert rapi.get("/2/filters") == [{"uuid": uuid, "uri": f"/2/filters/{uuid}"}]
    (rule,) = rapi.get("/2/filters?bulk=1")
    assert set(rule) == FILTER_FIELDS
    assert rule["action"] == "REJECT" and rule["priority"] == 3
    assert rule["reason_trail"][0] == ["test", "no delays", 1]
    assert rapi.get(f"/2/filters/{uuid}") == rule
    job = stack.submit(delay(0))
    assert stack.status(job) == "canceled"  # rejected at submit

    replaced = rapi.call("PUT", f"/2/filters/{uuid}", {"action": ["RATE_LIMIT", 2]})
    assert replaced.status == 200 and replaced.body == uuid
    rule = rapi.get(f"/2/filters/{uuid}")
    assert rule["action"] == ["RATE_LIMIT", 2] and rule["priority"] == 0  # PUT replaces all

    new = "0b7c2d6e-5f1a-4c3b-9d8e-7f6a5b4c3d2e"
    assert rapi.call("PUT", f"/2/filters/{new}", {"action": "ACCEPT"}).body == new  # creates
    assert len(rapi.get("/2/filters")) == 2

    deleted = rapi.call("DELETE", f"/2/filters/{uuid}")
    assert deleted.status == 200 and deleted.body is None
    assert_error(rapi.call("GET", f"/2/filters/{uuid}"), 404)
    assert_error(rapi.call("DELETE", f"/2/filters/{uuid}"), 404)


# -- authentication ----------------------------------------------------------------------------


def test_authentication_and_rights(rapi: Rapi, stack: Any) -> None:
    no_creds = rapi.call("GET", "/2/jobs", user=None)
    assert_error(no_creds, 401)
    assert no_creds.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert_error(rapi.call("GET", "/2/jobs", user=("admin", "wrong")), 401)
    assert_error(rapi.call("GET", "/2/jobs", user=("nobody", "x")), 401)
    assert_error(rapi.call("GET", "/2/jobs", user=None, headers={"Authorization": "Basic !!"}), 401)
    assert_error(rapi.call("GET", "/2/jobs", user=None, headers={"Authorization": "Bearer x"}), 401)

    assert rapi.call("GET", "/2/jobs", user=READER).status == 200
    assert rapi.call("GET", "/2/filters?bulk=1", user=READER).status == 200
    assert rapi.call("POST", "/2/filters", {}, user=READER).body["explain"] == "needs role filters"
    assert_error(rapi.call("DELETE", "/2/jobs/1", user=READER), 403)
    assert_error(rapi.call("POST", "/2/filters", {}, user=None), 401)
    assert rapi.call("POST", "/2/filters", {}, user=ADMIN).status == 200
    assert rapi.call("GET", "/version", user=("admin", "wrong")).status == 200  # public

    log = rapi.daemon.log()
    assert "wrong user name or password for 'admin'" in log
    assert "user 'reader' lacks role filters; 403" in log
    assert "admin-pw" not in log and "reader-pw" not in log


def test_users_file_is_reread_when_it_changes(rapi: Rapi, stack: Any) -> None:
    path = stack.wconfd.state_dir / "rapi_users"
    assert_error(rapi.call("GET", "/2/jobs", user=("carol", "c-pw")), 401)
    with path.open("a") as f:
        f.write(format_user(User("carol", hash_password("c-pw"), frozenset({"write"}))) + "\n")
    assert rapi.call("POST", "/2/filters", {}, user=("carol", "c-pw")).status == 200
    path.write_text(format_user(User("carol", hash_password("c-pw"))) + "\n")
    assert_error(rapi.call("POST", "/2/filters", {}, user=("carol", "c-pw")), 403)
    assert_error(rapi.call("GET", "/2/jobs", user=ADMIN), 401)  # admin is gone
    path.unlink()
    assert_error(rapi.call("GET", "/2/jobs", user=("carol", "c-pw")), 401)


def test_anonymous_reads_when_allowed(stack: Any, daemon_factory: Any) -> None:
    rapi = Rapi(daemon_factory, "--allow-anonymous-read")
    assert rapi.call("GET", "/2/jobs", user=None).status == 200
    assert rapi.call("GET", "/2/info", user=None).status == 200
    assert_error(rapi.call("POST", "/2/filters", {}, user=None), 401)
    assert_error(rapi.call("GET", "/2/jobs", user=("admin", "wrong")), 401)
    assert rapi.call("POST", "/2/filters", {}, user=ADMIN).status == 200


# -- malformed requests ------------------------------------------------------------------------


MALFORMED = [
    ("POST", "/2/filters", b"{", "malformed JSON"),
    ("POST", "/2/filters", b"\xff\xfe", "malformed JSON"),
    ("POST", "/2/filters", b"[1, 2]", "not a dictionary"),
    ("POST", "/2/filters", b'{"bogus": 1}', "bogus"),
    ("POST", "/2/filters", b'{"priority": "high"}', "priority"),
    ("POST", "/2/filters", b'{"priority": true}', "priority"),
    ("POST", "/2/filters", b'{"priority": -1}', "priority"),
    ("POST", "/2/filters", b'{"priority": 100000000000000000000000}', "priority"),
    ("POST", "/2/filters", b'{"predicates": "all"}', "predicates"),
    ("POST", "/2/filters", b'{"predicates": [["nosuch", 1]]}', "nosuch"),
    ("POST", "/2/filters", b'{"action": "EXPLODE"}', "action"),
    ("POST", "/2/filters", b'{"action": 7}', "action"),
    ("POST", "/2/filters", b'{"reason": [["a"]]}', "reason"),
    ("PUT", "/2/filters/not-a-uuid", b"{}", "UUID"),
    ("GET", "/2/jobs/abc", b"", "job id"),
    ("GET", "/2/jobs/0", b"", "job id"),
    ("GET", "/2/jobs/99999999999999999999999", b"", "job id"),
    ("GET", "/2/jobs?bulk=yes", b"", "bulk"),
    ("GET", "/2/jobs/1/wait", b"", "fields"),
    ("GET", "/2/jobs/1/wait", b'{"fields": "status"}', "fields"),
    (
        "GET",
        "/2/jobs/1/wait",
        b'{"fields": ["status"], "previous_job_info": 1}',
        "previous_job_info",
    ),
    (
        "GET",
        "/2/jobs/1/wait",
        b'{"fields": ["status"], "previous_log_serial": "x"}',
        "previous_log_serial",
    ),
    ("GET", "/2/jobs/1/wait", b'{"fields": ["nosuchfield"]}', "nosuchfield"),
]


def test_malformed_requests_get_400_with_a_message(rapi: Rapi, stack: Any) -> None:
    stack.wait_final(stack.submit(delay(0)))
    for method, path, raw, words in MALFORMED:
        assert_error(rapi.call(method, path, raw=raw), 400, words)
    assert rapi.call("GET", "/2/filters?bulk=").status == 200  # empty counts as 0, as in Ganeti
    assert "Traceback" not in rapi.daemon.log()


def test_unknown_paths_and_methods(rapi: Rapi) -> None:
    assert_error(rapi.call("GET", "/2/nope"), 404)
    assert_error(rapi.call("GET", "/3/jobs"), 404)
    answer = rapi.call("PATCH", "/2/filters", {})
    assert_error(answer, 405)
    assert "POST" in answer.headers["Allow"]
    assert_error(rapi.call("POST", "/2/filters", raw=b"{" * (5 * 1024 * 1024)), 413)


def test_unreachable_daemon_is_502_not_a_traceback(stack: Any, daemon_factory: Any) -> None:
    rapi = Rapi(daemon_factory)
    stack.luxid.stop()
    assert_error(rapi.call("GET", "/2/jobs"), 502, "luxid.sock")
    assert rapi.call("GET", "/2/nodes").status == 200  # wconfd still answers
    assert "Traceback" not in rapi.daemon.log()


# -- HTTPS -------------------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1/localhost and its key (cryptography, else openssl)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            pytest.skip("HTTPS test needs the cryptography package or the openssl command")
        subprocess.run(
            [
                openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ],
            check=True, capture_output=True,
        )  # fmt: skip
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    import ipaddress

    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path)


def test_https(stack: Any, daemon_factory: Any, tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    context = ssl.create_default_context(cafile=str(cert))
    rapi = Rapi(  # off loopback: HTTPS needs no --insecure-http
        daemon_factory,
        "--bind",
        "0.0.0.0",
        *("--ssl-cert", str(cert), "--ssl-key", str(key)),
        tls=context,
    )
    info = rapi.get("/2/info")
    assert info["name"] == "lockwarden" and info["insecure_http"] is False
    assert_error(rapi.call("GET", "/2/info", user=None), 401)
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{rapi.port}/version", timeout=5).read()


def test_unusable_certificate_fails_at_start(
    stack: Any, daemon_factory: Any, tmp_path: Path
) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    daemon = daemon_factory(
        "rapi", "--port", str(free_port()), "--ssl-cert", str(bogus), "--ssl-key", str(bogus)
    )
    daemon.start(wait=False)
    assert daemon.proc.wait(30) == 1
    assert "cannot use --ssl-cert" in daemon.log() and "Traceback" not in daemon.log()


# -- schema-driven fuzzing ---------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_openapi_fuzz_finds_no_server_error(rapi: Rapi, stack: Any) -> None:
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable

    stack.wait_final(stack.submit(delay(0, log_messages=["x"])))
    stack.wait_final(stack.submit(delay(0, fail=True)))
    schema = schemathesis.openapi.from_dict(rapi.get("/openapi.json"))
    token = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
    headers = {"Authorization": f"Basic {token}"}
    failures: list[str] = []
    # The event stream never ends by itself: each case would read until its timeout (its
    # own tests, tests/integration/test_events.py, drive it with a reader that stops).
    operations = [
        op
        for op in (result.ok() for result in schema.get_all_operations())
        if op.path != "/2/events"
    ]
    assert len(operations) >= 16
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(
                max_examples=25,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                response = case.call(base_url=rapi.base, headers=headers, timeout=30)
                # 501 is a deliberate answer: this luxid does not serve drains (yet)
                not_served = response.status_code == 501 and "does not serve" in response.text
                if response.status_code >= 500 and not not_served:
                    failures.append(
                        f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:200]}"
                    )
                assert "Traceback" not in response.text

            try:
                check()
            except Unsatisfiable:  # nothing to make invalid (an operation without inputs)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures)
    assert "Traceback" not in rapi.daemon.log()


# -- Ganeti's own client -----------------------------------------------------------------------

GANETI_SCRIPT = r"""
import json, sys
from ganeti.rapi import client as rc

port, user, password, job = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
c = rc.GanetiRapiClient("127.0.0.1", port, username=user, password=password)
out = {}
out["version"] = c.GetVersion()
out["info"] = c.GetInfo()["name"]
out["nodes"] = c.GetNodes()
out["instances"] = c.GetInstances()
uuid = c.AddFilter(5, [["jobid", [">", "id", "watermark"]]], "PAUSE", [["test", "compat", 1]])
out["filters"] = c.GetFilters()
out["filters_bulk"] = c.GetFilters(bulk=True)
out["filter"] = c.GetFilter(uuid)
out["replaced"] = c.ReplaceFilter(uuid, 6, [], ["RATE_LIMIT", 3])
out["filter_after"] = c.GetFilter(uuid)
out["deleted"] = c.DeleteFilter(uuid)
out["filters_after"] = c.GetFilters()
out["jobs"] = c.GetJobs()
out["jobs_bulk"] = c.GetJobs(bulk=True)
out["job"] = c.GetJobStatus(job)
out["wait"] = c.WaitForJobChange(job, ["status", "opstatus"], None, None)
out["cancel"] = c.CancelJob(job)
try:
    c.GetJobStatus(999)
except rc.GanetiApiError as err:
    out["missing"] = [err.code, str(err)]
print(json.dumps(out))
"""


def ganeti_python() -> str:
    """A Python that can import Ganeti's RAPI client (Debian's python3-ganeti-rapi)."""
    for python in ("/usr/bin/python3", shutil.which("python3")):
        if (
            python
            and subprocess.run(
                [python, "-c", "import ganeti.rapi.client, pycurl"], capture_output=True
            ).returncode
            == 0
        ):
            return python
    pytest.skip("Ganeti's RAPI client is not installed (apt-get install python3-ganeti-rapi)")


def test_ganeti_rapi_client_works_unchanged(
    stack: Any, daemon_factory: Any, tls_files: tuple[Path, Path]
) -> None:
    python = ganeti_python()
    cert, key = tls_files
    context = ssl.create_default_context(cafile=str(cert))
    rapi = Rapi(daemon_factory, "--ssl-cert", str(cert), "--ssl-key", str(key), tls=context)
    stack.wait_final(stack.submit({"OP_ID": "OP_NODE_ADD", "node_name": "n1"}))
    job = stack.submit(delay(0, log_messages=["from ganeti"]))
    stack.wait_final(job)
    done = subprocess.run(
        [python, "-c", GANETI_SCRIPT, str(rapi.port), *ADMIN, str(job)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == 2 and out["info"] == "lockwarden"
    assert out["nodes"] == ["n1"] and out["instances"] == []
    (uuid,) = out["filters"]
    assert out["filters_bulk"][0]["uuid"] == uuid and out["filters_bulk"][0]["action"] == "PAUSE"
    assert out["filter"]["priority"] == 5
    assert out["filter"]["reason_trail"][0] == ["test", "compat", 1]
    assert out["filter"]["reason_trail"][1][0] == "gnt:client"
    assert out["replaced"] == uuid
    assert (
        out["filter_after"]["action"] == ["RATE_LIMIT", 3] and out["filter_after"]["priority"] == 6
    )
    assert out["deleted"] is None and out["filters_after"] == []
    assert out["jobs"] == [1, job]
    assert [j["id"] for j in out["jobs_bulk"]] == [1, job]
    assert out["job"]["status"] == "success" and out["job"]["oplog"][0][0][3] == "from ganeti"
    assert out["wait"]["job_info"] == ["success", ["success"]]
    assert out["wait"]["log_entries"][0][3] == "from ganeti"
    assert out["cancel"][0] is False
    assert out["missing"][0] == 404


# -- systemd notify ----------------------------------------------------------------------------


def test_sd_notify_ready_watchdog_stopping(
    stack: Any, daemon_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify_path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(notify_path))
        sock.settimeout(10)
        monkeypatch.setenv("NOTIFY_SOCKET", str(notify_path))
        monkeypatch.setenv("WATCHDOG_USEC", "200000")  # a ping every 0.1 s
        rapi = Rapi(daemon_factory)
        messages = [sock.recv(4096).decode() for _ in range(3)]
        assert messages[0] == f"READY=1\nSTATUS=serving on http://127.0.0.1:{rapi.port}/"
        assert messages[1:] == ["WATCHDOG=1", "WATCHDOG=1"]
        assert rapi.daemon.stop() == 0
        rest = []
        while True:
            message = sock.recv(4096).decode()
            rest.append(message)
            if message != "WATCHDOG=1":
                break
        assert rest[-1] == "STOPPING=1"
