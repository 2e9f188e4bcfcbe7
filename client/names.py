"""What a name may be (docs/contracts.md#names): one definition of each rule, shared by
wconfd's checks, the opcodes' params and the clients.

- Node, instance, node group and network names are RFC 1123 host names in ASCII: labels
  of letters, digits and `-`, not starting or ending with `-`, separated by single dots,
  no trailing dot, 1-253 characters, labels of at most 63.
- Client names (`identify`'s `name`): 1-64 of `A-Z a-z 0-9 . _ @ + -`.
- Tags: 1-128 of `A-Z a-z 0-9 . _ : + -`.

The patterns end in `\\Z`, not `$` (which also matches before a final newline), so a name
with a newline never passes; they are plain strings too, for msgspec's `Meta(pattern=…)`.
"""

from __future__ import annotations

import re
from typing import Final

_LABEL: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_NAME_PATTERN: Final = rf"^(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\Z"
HOST_NAME_RE: Final = re.compile(HOST_NAME_PATTERN)
HOST_NAME_RULE: Final = (
    "an RFC 1123 host name: ASCII letters, digits and '-' in labels of 1-63 characters "
    "that neither start nor end with '-', joined by single dots (no trailing dot), "
    "1-253 characters in all"
)

CLIENT_NAME_PATTERN: Final = r"^[A-Za-z0-9._@+-]{1,64}\Z"
CLIENT_NAME_RE: Final = re.compile(CLIENT_NAME_PATTERN)
CLIENT_NAME_RULE: Final = "1-64 characters of A-Z a-z 0-9 . _ @ + -"

TAG_PATTERN: Final = r"^[A-Za-z0-9._:+-]{1,128}\Z"
TAG_RE: Final = re.compile(TAG_PATTERN)
TAG_RULE: Final = "1-128 characters of A-Z a-z 0-9 . _ : + -"


def is_host_name(name: str) -> bool:
    """Whether `name` is a node/instance/node group/network name (HOST_NAME_RULE)."""
    return HOST_NAME_RE.match(name) is not None


def is_client_name(name: str) -> bool:
    """Whether `name` may be a client's name at `identify` (CLIENT_NAME_RULE)."""
    return CLIENT_NAME_RE.match(name) is not None


def is_tag(tag: str) -> bool:
    """Whether `tag` is a tag (TAG_RULE)."""
    return TAG_RE.match(tag) is not None
