"""Stopping ``txnlog serve`` (SIGTERM, SIGINT) while a client produces: the server stops
accepting, answers or fails what is in flight, closes the log and exits 0; every record a
client saw acknowledged is in the log exactly once."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.txn_wire.serve_process import ServeProcess, start_serve
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_mid_produce_loses_nothing_acknowledged(
    server: ServeProcess, signum: int
) -> None:
    acked: list[bytes] = []
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 3000,
            "log_level": 0,
        }
    )

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.append(message.value())

    stop = threading.Event()

    def produce_until_stopped() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    "orders", value=f"m-{i}".encode(), partition=0, on_delivery=delivered
                )
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)

    writer = threading.Thread(target=produce_until_stopped)
    writer.start()
    while len(acked) < 200:  # the server is busy answering produces
        time.sleep(0.01)
    assert server.stop(signum) == 0
    stop.set()
    writer.join()
    producer.flush(10)  # whatever was in flight fails now: the server is gone
    with Log.open(server.path) as log:
        consumer = log.consumer("read_uncommitted")
        in_log = [r.value for r in consumer.read(TopicPartition("orders", 0), 0)]
    assert len(in_log) == len(set(in_log))
    assert set(acked) <= set(in_log)
    assert len(acked) >= 200
    stderr = server.process.stderr.read() if server.process.stderr else ""
    assert "txnlog serve: stopped" in stderr
    assert "Traceback" not in stderr, stderr


def test_after_stop_the_port_accepts_no_connection(server: ServeProcess) -> None:
    RawClient(server.port).close()
    assert server.stop() == 0
    with pytest.raises(OSError):
        RawClient(server.port)


def test_server_sigkilled_mid_transaction_keeps_exactly_the_committed_data(
    server: ServeProcess,
) -> None:
    """A committed transaction survives a SIGKILL of the server; the one open at the kill
    is aborted when the transactional id initialises again (C-14) on a restarted server."""
    from confluent_kafka import KafkaException

    from tests.txn_wire.serve_process import start_serve
    from tests.txn_wire.wire_clients import WAIT_S, confluent_consumer, consume_to

    config = {
        "bootstrap.servers": server.bootstrap,
        "transactional.id": "crashy",
        "log_level": 0,
        "message.timeout.ms": 5000,
    }
    producer = Producer(config)
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("orders", value=f"kept-{i}".encode(), partition=i % 2)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(20):
        producer.produce("orders", value=f"lost-{i}".encode(), partition=i % 2)
    producer.flush(WAIT_S)  # written to the log, the transaction still open
    server.stop(signal.SIGKILL)
    with pytest.raises(KafkaException):
        producer.commit_transaction(3)

    restarted = start_serve(server.path)
    try:
        successor = Producer({**config, "bootstrap.servers": restarted.bootstrap})
        successor.init_transactions(WAIT_S)  # fences the old instance, aborts its transaction
        with Log.open(server.path) as log:
            ends = {
                p: log.partition_reader(TopicPartition("orders", p)).last_stable_offset
                for p in (0, 1)
            }
        consumer = confluent_consumer(restarted.bootstrap, "read_committed")
        got = consume_to(consumer, "orders", ends)
        consumer.close()
        assert sorted(v for _, _, v in got) == sorted(f"kept-{i}".encode() for i in range(20))
        with Log.open(server.path) as log:
            high = log.partition_reader(TopicPartition("orders", 0)).high_watermark
        assert ends[0] == high  # nothing left open
    finally:
        restarted.stop()


def test_a_sigterm_sent_as_soon_as_the_address_is_printed_stops_cleanly(tmp_path: Path) -> None:
    """The signal handlers are in place before the banner: an operator (or a test) that stops
    the server the moment it reads the address gets a clean stop (exit 0, "stopped"), never
    the default SIGTERM death (exit -15) that skips closing the log."""
    for attempt in range(5):
        server = start_serve(tmp_path / f"log-{attempt}")
        assert server.stop() == 0, f"attempt {attempt}"
        stderr = server.process.stderr.read() if server.process.stderr else ""
        assert "txnlog serve: stopped" in stderr
