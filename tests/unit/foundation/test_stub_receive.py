"""How the sync stub receives frames from a real socket: every frame whole and in order,
however the bytes arrive; frames over a megabyte received into the mapping the stub keeps
(a line is valid until the next read, and a view handed out stays readable when the
mapping grows); and a forked child's receives never land in its parent's memory."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator, Sequence

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from client import WConfdClient, stubs
from client.protocol import RESULT_HEAD, decode_response

MiB = 1 << 20


def frame(size: int, request_id: int) -> bytes:
    """A result frame as the daemons write it, its result a string of about `size` bytes."""
    text = chr(ord("a") + request_id % 26) * size
    return RESULT_HEAD + msgspec.json.encode(text) + b',"id":%d}\n' % request_id


@contextlib.contextmanager
def receiving(data: bytes, pieces: Sequence[int] = ()) -> Iterator[socket.socket]:
    """Our end of a socket pair whose other end sends `data`, cut after each of `pieces`."""
    ours, theirs = socket.socketpair()

    def send() -> None:
        at = 0
        for n in pieces:
            theirs.sendall(data[at : at + n])
            at += n
        theirs.sendall(data[at:])

    sender = threading.Thread(target=send)
    sender.start()
    try:
        yield ours
    finally:
        sender.join()
        ours.close()
        theirs.close()


sizes = st.lists(
    st.sampled_from([10, 64 * 1024, MiB - 40, MiB + 1, 3 * MiB, 9 * MiB]), min_size=1, max_size=4
)


@settings(max_examples=15, deadline=None)
@given(sizes, st.lists(st.integers(1, 3 * MiB), max_size=6))
def test_frames_are_read_whole_and_in_order_however_they_arrive(sizes, pieces):
    stub = WConfdClient("/nonexistent.sock")
    frames = [frame(n, i) for i, n in enumerate(sizes)]
    with receiving(b"".join(frames), pieces) as ours:
        for i, sent in enumerate(frames):
            line = stub._read_line(ours)
            assert bytes(line) == sent[:-1]
            response = decode_response(line)
            assert response.id == i
            assert msgspec.json.decode(response.result) == msgspec.json.decode(sent)["result"]


def test_the_mapping_grows_to_a_larger_frame_and_a_view_handed_out_stays_readable():
    stub = WConfdClient("/nonexistent.sock")
    small, large = frame(2 * MiB, 1), frame(20 * MiB, 2)
    with receiving(small + large) as ours:
        first = stub._read_line(ours)
        assert isinstance(first, memoryview)  # a view of the mapping, not a copy
        assert bytes(first) == small[:-1]
        mapping = stub._big
        second = stub._read_line(ours)  # received partly before the growth, partly after
        assert stub._big is not mapping and bytes(second) == large[:-1]
        # The first view is of the old mapping, which lives while it is referenced (its
        # contents are the next frame's: a line is valid until the next read).
        assert len(bytes(first)) == len(small) - 1


def test_the_mapping_is_kept_for_the_next_large_frame_and_dropped_on_close():
    stub = WConfdClient("/nonexistent.sock")
    with receiving(frame(3 * MiB, 1) + frame(3 * MiB, 2)) as ours:
        stub._read_line(ours)
        mapping = stub._big
        stub._read_line(ours)
        assert stub._big is mapping
        stub.close()
        assert stub._big is None


def test_a_forked_childs_receives_never_land_in_its_parents_buffer():
    stub = WConfdClient("/nonexistent.sock")
    stub._chunk[:6] = b"parent"
    pid = os.fork()
    if pid == 0:  # the child writes where its receives land
        stub._chunk[:6] = b"child!"
        os._exit(0)
    os.waitpid(pid, 0)
    assert bytes(stub._chunk[:6]) == b"parent"


def test_the_big_frame_threshold_is_below_the_frames_tested():
    assert 3 * MiB >= stubs._BIG_FRAME
