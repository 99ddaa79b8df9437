"""Helpers driving unmodified Kafka clients against a served log, and a raw socket client."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from txn_wire.codec import decode_response, encode_request

WAIT_S = 60  # how long a helper waits for something that must happen (never asserted on)


def confluent_producer(bootstrap: str, **config: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})


def produce_all(producer: Producer, sends: list[tuple[str, int, bytes]]) -> list[tuple[int, int]]:
    """Produce ``(topic, partition, value)`` records; their (partition, offset) once acked.
    Raises the first delivery error."""
    acked: list[tuple[int, int]] = []
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked.append((message.partition(), message.offset()))

    for topic, partition, value in sends:
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    remaining = producer.flush(WAIT_S)
    if errors or remaining:
        raise AssertionError(f"delivery failed: {errors}, {remaining} not delivered")
    return acked


def confluent_consumer(bootstrap: str, isolation: str, **config: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "wire-tests",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )


def consume_to(
    consumer: Consumer, topic: str, ends: dict[int, int], start: int = 0
) -> list[tuple[int, int, bytes]]:
    """Assign ``topic``'s partitions at ``start`` and poll until the consumer's position on
    each reaches its end in ``ends`` (position, not the last record seen: markers and aborted
    records leave gaps, SPARK-25005). Returns (partition, offset, value) in delivery order."""
    consumer.assign([KafkaPartition(topic, p, start) for p in ends])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            if message.error():
                raise AssertionError(f"consumer error: {message.error()}")
            got.append((message.partition(), message.offset(), message.value()))
        positions = consumer.position([KafkaPartition(topic, p) for p in ends])
        if all(tp.offset >= ends[tp.partition] for tp in positions):
            return got
    raise AssertionError(f"consumer did not reach {ends}; got {got}")


class RawClient:
    """A bare TCP client speaking frames, to send what no real client would."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.correlation_id = 0

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.send_bytes(encode_request(api_key, version, self.correlation_id, body))
        correlation_id, response = decode_response(api_key, version, self.read_frame())
        if correlation_id != self.correlation_id:
            raise AssertionError(f"correlation id {correlation_id} != {self.correlation_id}")
        return response

    def read_frame(self) -> bytes:
        (length,) = struct.unpack(">i", self._read(4))
        return self._read(length)

    def is_closed_by_server(self) -> bool:
        """Whether the server closed the connection (reads EOF)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()
