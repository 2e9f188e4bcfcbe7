"""One client's bad write never fails another's (issue 10 defect 4, wconfd side).

Numbers no part of the system can hold (ints outside signed 64 bits, also nested in an
`object` payload) are refused with InvalidParams naming the field, before the write
joins a group commit; the valid writes sharing that moment all succeed.
"""

from __future__ import annotations

import asyncio

import pytest

from client import AsyncWConfdClient, WConfdClient, errors

pytestmark = pytest.mark.timeout(60)

SETS = [
    ["cluster/BGL", "exclusive"],
    ["instance/[lockset]", "exclusive"],
    ["node/[lockset]", "exclusive"],
]


def _instance(name: str, memory: int) -> dict[str, object]:
    return {"name": name, "primary_node": "n0", "memory": memory, "disks": [{"size": 1}]}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (("instance", _instance("huge", 2**80)), "object.memory"),
        (("instance", _instance("wide", 2**63)), "object.memory"),
        (
            ("instance", {**_instance("disk", 1), "disks": [{"size": -(2**70)}]}),
            "object.disks[0].size",
        ),
        (
            ("filter", {"predicates": [["jobid", [">", "id", 10**30]]], "action": "REJECT"}),
            "object.predicates[0][1][2]",
        ),
    ],
)
def test_concurrent_valid_writes_survive_one_bad_write(wconfd, bad, field):
    admin = WConfdClient(wconfd.socket, name="writer")
    assert admin.try_update_locks(SETS) == []
    admin.add_object("node", {"name": "n0"})

    async def run() -> list[object]:
        client = AsyncWConfdClient(wconfd.socket, name="writer")
        calls = [client.add_object("node", {"name": f"n{i}"}) for i in range(1, 20)]
        calls.insert(10, client.add_object(*bad))
        calls += [client.add_object("instance", _instance(f"i{i}", 64)) for i in range(10)]
        try:
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await client.close()

    outcomes = asyncio.run(run())
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == 1, failed
    assert isinstance(failed[0], errors.InvalidParams)
    assert field in failed[0].message
    assert len({o["name"] for o in admin.list_objects("node")}) == 20
    assert len(admin.list_objects("instance")) == 10
    assert "internal error" not in wconfd.log().lower()


def test_ranges_of_fields_are_checked(wconfd):
    wc = WConfdClient(wconfd.socket, name="writer")
    assert wc.try_update_locks(SETS) == []
    wc.add_object("node", {"name": "n0"})
    for obj, field in [
        (_instance("m", -1), "memory"),
        ({**_instance("v", 1), "vcpus": 0}, "vcpus"),
        ({**_instance("d", 1), "disks": [{"size": 0}]}, "disks[0].size"),
    ]:
        with pytest.raises(errors.ConfigValidationError, match=field.replace("[", r"\[")):
            wc.add_object("instance", obj)
