"""The seeds' metrics (MET-01..03, MET-05) read from a log: live producer ids and the last
stable offset per partition, transactional ids by state, read_committed lag against the LSO;
their Prometheus text form and ``txnlog metrics``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import directory_bytes
from txn_log.clock import SYSTEM_CLOCK, Clock, ManualClock
from txn_log.log import Log
from txn_log.log_metrics import collect, render_prometheus
from txn_log.topic_partition import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
TXNLOG = str(Path(sys.executable).with_name("txnlog"))


def build(path: Path, clock: Clock | None = None) -> Log:
    """t-0: 2 idempotent records and a committed transaction of 1; t-1: a committed
    transaction of 1, then an open one of 2 (which holds t-1's LSO); group g at t-0 offset 2.
    The clock is a manual one unless given (another process on the system clock would find
    the open transaction long timed out)."""
    log = Log.open(path, clock=clock or ManualClock())
    log.create_topic("t", partitions=2)
    plain = log.producer()
    plain.send("t", b"a", partition=0)
    plain.send("t", b"b", partition=0)
    plain.flush()
    done = log.producer("done")
    done.init_transactions()
    done.begin_transaction()
    done.send("t", b"c", partition=0)
    done.send("t", b"d", partition=1)
    done.send_offsets_to_transaction({T0: 2}, "g")
    done.commit_transaction()
    open_ = log.producer("open")
    open_.init_transactions()
    open_.begin_transaction()
    open_.send("t", b"e", partition=1)
    open_.send("t", b"f", partition=1)
    open_.flush()
    return log


def test_collect_reports_live_producers_lso_transactional_ids_and_lag_met_01_02_03_05(
    tmp_path: Path,
) -> None:
    log = build(tmp_path)
    metrics = collect(log)
    by_tp = {(p.topic, p.partition): p for p in metrics.partitions}
    t0, t1 = by_tp[("t", 0)], by_tp[("t", 1)]
    # t-0: a, b, c and c's COMMIT marker; two producers (idempotent and "done")
    assert (t0.high_watermark, t0.last_stable_offset, t0.live_producer_ids) == (4, 4, 2)
    # t-1: d, its marker, then e, f open: the LSO stays at e (MET-02)
    assert (t1.high_watermark, t1.last_stable_offset) == (4, 2)
    assert (t1.live_producer_ids, t1.ongoing_transactions) == (2, 1)
    assert ("__transaction_state", 0) in by_tp and ("__consumer_offsets", 0) in by_tp
    assert metrics.transactional_ids == {"CompleteCommit": 1, "Ongoing": 1}  # MET-03
    (lag,) = metrics.groups
    assert (lag.group, lag.topic, lag.partition) == ("g", "t", 0)
    assert (lag.committed_offset, lag.read_committed_lag) == (2, 4 - 2)  # against the LSO
    log.close()


def test_the_prometheus_text_carries_each_metric_with_its_labels(tmp_path: Path) -> None:
    text = render_prometheus(collect(build(tmp_path)))
    lines = set(text.splitlines())
    assert 'txnlog_partition_last_stable_offset{topic="t",partition="1"} 2' in lines
    assert 'txnlog_partition_high_watermark{topic="t",partition="1"} 4' in lines
    assert 'txnlog_partition_live_producer_ids{topic="t",partition="0"} 2' in lines
    assert 'txnlog_transactional_ids{state="Ongoing"} 1' in lines
    assert 'txnlog_group_read_committed_lag{group="g",topic="t",partition="0"} 2' in lines
    assert "# TYPE txnlog_group_read_committed_lag gauge" in lines
    assert "txnlog_coordinator_busy 0" in lines  # the coordinator was read for this scrape
    samples = [line for line in lines if line and not line.startswith("#")]
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in samples)


def test_txnlog_metrics_prints_the_same_figures_and_changes_nothing(tmp_path: Path) -> None:
    build(tmp_path, SYSTEM_CLOCK).close()
    before = directory_bytes(tmp_path, content_only=True)
    text = subprocess.run(
        [TXNLOG, "metrics", str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    assert 'txnlog_partition_last_stable_offset{topic="t",partition="1"} 2' in text
    document = json.loads(
        subprocess.run(
            [TXNLOG, "metrics", str(tmp_path), "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert document["transactional_ids"] == {"CompleteCommit": 1, "Ongoing": 1}
    assert document["groups"][0]["read_committed_lag"] == 2
    assert directory_bytes(tmp_path, content_only=True) == before


def test_label_values_escape_newlines_quotes_and_backslashes(tmp_path: Path) -> None:
    """Prometheus' text format escapes a label value's backslash, double quote and line feed
    (``\\\\``, ``\\"``, ``\\n``). A group id may hold all three (Kafka allows any string): an
    unescaped line feed split the sample across two lines, and Prometheus refused the whole
    scrape."""
    log = build(tmp_path)
    group = 'odd\n"group"\\'
    committer = log.producer("odd")
    committer.init_transactions()
    committer.begin_transaction()
    committer.send("t", b"g", partition=0)
    committer.send_offsets_to_transaction({T0: 1}, group)
    committer.commit_transaction()
    text = render_prometheus(collect(log))
    lines = text.splitlines()
    assert (
        'txnlog_group_read_committed_lag{group="odd\\n\\"group\\"\\\\",topic="t",partition="0"} 5'
        in lines
    )
    samples = [line for line in lines if line and not line.startswith("#")]
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in samples), samples
