"""The checks lw-rapi makes at the edge of Ganeti's instance creation (docs/rapi-instances.md),
as properties: whatever JSON a client sends is either a 400 that says what to send, or
opcodes that jobproc's own parameter Structs accept — so a request the RAPI takes never
becomes a job luxid refuses for a reason the client was not told (an instance name outside
the name syntax aside, which luxid answers with its own 400).
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from jobproc.opcodes.builtin.instance import InstanceCreateParams
from jobproc.opcodes.builtin.instance_state import InstanceStateParams
from rapi.instanceops import CREATE_EXAMPLE, create_ops, parse_create
from rapi.routing import HttpError

VALID = msgspec.json.decode(CREATE_EXAMPLE)
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.just(10**400) | st.floats() | st.text(max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
SIZES = st.integers(-2, 2**64) | SCALARS
FIELDS = {
    "__version__": st.sampled_from([0, 1, 2, True, "1"]) | SCALARS,
    "mode": st.sampled_from(["create", "import", "remote-import"]) | SCALARS,
    "name": st.sampled_from(["vm1", "web-2.example.com", "", "bad name"]) | SCALARS,
    "disk_template": st.sampled_from(["plain", "drbd", "sharedfile"]) | SCALARS,
    "disks": st.lists(
        st.fixed_dictionaries(
            {"size": SIZES}, optional={"mode": st.sampled_from(["rw", "ro", "rx"])}
        ),
        max_size=3,
    )
    | JSON,
    "nics": st.lists(st.dictionaries(st.text(max_size=5), JSON, max_size=2), max_size=9) | JSON,
    "beparams": st.fixed_dictionaries(
        {}, optional={"maxmem": SIZES, "memory": SIZES, "vcpus": SIZES}
    )
    | JSON,
    "pnode": st.sampled_from(["n1", None]) | SCALARS,
    "start": st.booleans() | SCALARS,
    "os": JSON,
}
BODIES = st.fixed_dictionaries({}, optional=FIELDS).map(lambda b: {**VALID, **b}) | JSON


@given(BODIES)
def test_a_creation_body_gives_valid_opcodes_or_a_400(body: Any) -> None:
    try:
        request = parse_create(body)
    except HttpError as exc:
        assert exc.status == 400 and "send" in exc.explain
        return
    create, *rest = create_ops(request)
    assert create.pop("OP_ID") == "OP_INSTANCE_CREATE"
    try:
        params = msgspec.convert(create, InstanceCreateParams)
    except msgspec.ValidationError as exc:  # only the names' syntax is left to luxid
        assert any(field in str(exc) for field in ("instance_name", "$.pnode", "$.nics")), exc
        return
    assert params.memory == (body["beparams"].get("maxmem") or body["beparams"]["memory"])
    assert [d.size for d in params.disks] == [d["size"] for d in body["disks"]]
    assert params.nics == len(body["nics"])
    if body.get("start", True) is False:
        (shutdown,) = rest
        assert shutdown.pop("OP_ID") == "OP_INSTANCE_SHUTDOWN"
        msgspec.convert(shutdown, InstanceStateParams)
    else:
        assert rest == []


def test_the_example_is_a_valid_request() -> None:
    (op,) = create_ops(parse_create(VALID))
    assert op == {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "memory": 2048,
                  "vcpus": 2, "disks": [{"size": 10240, "mode": "rw"}], "nics": 1}  # fmt: skip
