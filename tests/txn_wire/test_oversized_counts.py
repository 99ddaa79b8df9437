"""Issue 24, defect 3, over the wire: one small frame whose array declares 2**32-2 elements
made kio's native reader ask for 34 GB and the allocator abort ``txnlog serve`` (exit -6,
"memory allocation of 34359738352 bytes failed"). Raw frames no client library would send,
to real servers: an open one, and a secured one where the sender is an authenticated
principal without a single ACL (the frame is decoded before authorization). The connection
that sent the frame is closed; the server lives and answers others.
"""

from __future__ import annotations

import contextlib
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_wire.auth_clients import plain_login, write_acls, write_users
from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S, RawClient
from txn_wire.codec import LENGTH

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
HUGE_COMPACT = b"\xff\xff\xff\xff\x0f"  # uvarint 2**32-1: a compact array of 2**32-2
NO_CLIENT_ID = struct.pack(">h", -1)


def metadata_v12_huge_topics() -> bytes:
    """The issue's frame: Metadata v12 whose topics array declares 2**32-2 elements."""
    body = (
        struct.pack(">hhi", METADATA, 12, 1)
        + NO_CLIENT_ID
        + b"\x00"  # header tagged fields
        + HUGE_COMPACT  # topics
        + b"\x01\x00\x00"  # allow_auto_topic_creation, include_..._operations, tagged fields
    )
    return LENGTH.pack(len(body)) + body


def produce_v9_huge_topics() -> bytes:
    body = (
        struct.pack(">hhi", PRODUCE, 9, 1)
        + NO_CLIENT_ID
        + b"\x00"
        + b"\x00"  # transactional_id: null
        + struct.pack(">hi", -1, 30_000)  # acks, timeout
        + HUGE_COMPACT  # topic_data
        + b"\x00"
    )
    return LENGTH.pack(len(body)) + body


def produce_v3_huge_partitions() -> bytes:
    """Legacy (int32) arrays: one topic whose partition_data declares 2**31-1 elements. kio
    asks for 17 GB: on a machine with more memory than that the (lazy) allocation succeeds
    and kio then fails on the missing elements, so this one crashes small machines only."""
    body = (
        struct.pack(">hhi", PRODUCE, 3, 1)
        + NO_CLIENT_ID
        + struct.pack(">h", -1)  # transactional_id: null
        + struct.pack(">hi", -1, 30_000)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">i", 2**31 - 1)  # partition_data
    )
    return LENGTH.pack(len(body)) + body


HOSTILE = {
    "metadata-v12-compact-2^32-2": metadata_v12_huge_topics(),
    "produce-v9-compact-2^32-2": produce_v9_huge_topics(),
    "produce-v3-int32-2^31-1": produce_v3_huge_partitions(),
}


@pytest.fixture(params=["open", "secured"])
def hostile_target(
    request: pytest.FixtureRequest, log_dir: Path, tmp_path: Path
) -> Iterator[tuple[ServeProcess, RawClient]]:
    """A server and a connection that may send requests: on an open server any client; on a
    secured one alice, authenticated, with no ACL of her own (only bob has one)."""
    if request.param == "open":
        served = start_serve(log_dir)
    else:
        users = write_users(tmp_path / "users.json", {"alice": "a-secret", "bob": "b-secret"})
        acls = write_acls(tmp_path / "acls.txt", ["User:bob topic orders Describe allow"])
        served = start_serve(log_dir, "--users-file", str(users), "--acl-file", str(acls))
    try:
        client = (
            RawClient(served.port)
            if request.param == "open"
            else plain_login(served.port, "alice", "a-secret")
        )
        yield served, client
        client.close()
    finally:
        served.stop()


def assert_alive(served: ServeProcess, what: str) -> None:
    """AssertionError with the server's exit code and first line of stderr if it is gone."""
    code = served.process.poll()
    if code is not None:
        err = served.process.stderr.read() if served.process.stderr else ""
        first = err.strip().splitlines()[0] if err.strip() else "(no stderr)"
        raise AssertionError(f"txnlog serve died (exit {code}) after {what}: {first}")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_count_larger_than_its_frame_closes_the_connection_not_the_server(
    hostile_target: tuple[ServeProcess, RawClient], name: str
) -> None:
    served, client = hostile_target
    frame = HOSTILE[name]
    what = f"one {len(frame)}-byte frame ({name})"
    client.send_bytes(frame)
    closed = client.is_closed_by_server()
    try:
        bystander = RawClient(served.port)
        versions = bystander.request(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        bystander.close()
    except OSError:  # refused or reset: the server is going or gone; say how it ended
        with contextlib.suppress(subprocess.TimeoutExpired):
            served.process.wait(timeout=WAIT_S)
        assert_alive(served, what)
        raise
    assert_alive(served, what)
    assert closed, "the connection that sent the frame stays open"
    assert versions["error_code"] == 0
