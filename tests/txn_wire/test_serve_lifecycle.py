"""Stopping ``txnlog serve`` (SIGTERM, SIGINT) while a client produces: the server stops
accepting, answers or fails what is in flight, closes the log and exits 0; every record a
client saw acknowledged is in the log exactly once."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.txn_wire.serve_process import ServeProcess
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
