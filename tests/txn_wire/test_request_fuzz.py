"""Hypothesis fuzz of the request decoder and of a real server (issue 15 item 6).

In process: any bytes decode to a request or raise MalformedRequestError, nothing else. Over
the wire: random frames, truncated real requests and unknown API keys make the server answer
or close that connection; it never crashes, keeps answering others, and the partitions'
files are untouched.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import directory_bytes
from tests.txn_wire.serve_process import start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_wire.api_versions import SUPPORTED
from txn_wire.codec import MalformedRequestError, decode_request, encode_request

REAL_REQUESTS = [
    encode_request(18, 3, 1, {"client_software_name": "f", "client_software_version": "1"}),
    encode_request(3, 12, 2, {"topics": [{"name": "orders"}]}),
    encode_request(
        1,
        12,
        3,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "isolation_level": 1,
            "topics": [
                {
                    "topic": "orders",
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    ),
    encode_request(
        2,
        6,
        4,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    ),
]


def frames() -> st.SearchStrategy[bytes]:
    """Frame bodies (no length prefix): garbage, supported headers with garbage bodies,
    unknown API keys, and real requests truncated or with bytes flipped."""
    garbage = st.binary(max_size=300)
    headed = st.builds(
        lambda key, version, body: struct.pack(">hhi", key, version, 7) + body,
        st.sampled_from([k for k in SUPPORTED if k not in (0, 8, 21, 22, 24, 25, 26, 28)])
        | st.integers(-5, 2000),
        st.integers(-2, 20),
        st.binary(max_size=200),
    )
    real = st.sampled_from(REAL_REQUESTS).map(lambda frame: frame[4:])
    truncated = st.tuples(real, st.integers(0, 400)).map(lambda t: t[0][: t[1]])
    flipped = st.tuples(real, st.integers(8, 400), st.integers(1, 255)).map(
        lambda t: (
            t[0][: t[1]] + bytes([t[0][t[1]] ^ t[2]]) + t[0][t[1] + 1 :]
            if t[1] < len(t[0])
            else t[0]
        )
    )
    return garbage | headed | truncated | flipped


@settings(max_examples=2000, deadline=None)
@given(frames())
def test_the_decoder_reads_a_request_or_says_malformed(frame: bytes) -> None:
    try:
        request = decode_request(frame)
    except MalformedRequestError:
        return
    assert isinstance(request.body, dict)


def test_the_decoder_reads_every_real_request() -> None:
    for frame in REAL_REQUESTS:
        assert isinstance(decode_request(frame[4:]).body, dict)


def test_a_fuzzed_server_answers_or_closes_and_never_crashes(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        producer = log.producer()
        producer.send("orders", b"kept", partition=0)
        producer.flush()
    partitions = path / "orders-0"
    before = directory_bytes(partitions, content_only=True)
    served = start_serve(path)
    try:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(frames())
        def send(frame: bytes) -> None:
            with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
                sock.sendall(struct.pack(">i", len(frame)) + frame)
                sock.shutdown(socket.SHUT_WR)  # a truncated frame ends here: the client left
                while sock.recv(65536):  # an answer, then EOF; or EOF at once
                    pass
            assert served.process.poll() is None

        send()
        bystander = RawClient(served.port)
        answer = bystander.request(
            18, 3, {"client_software_name": "f", "client_software_version": "1"}
        )
        bystander.close()
        assert answer["error_code"] == 0
    finally:
        assert served.stop() == 0
    assert directory_bytes(partitions, content_only=True) == before
