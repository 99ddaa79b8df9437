"""The metrics the seeds name (MET-01..03, MET-05), read from a ``Log``, and their Prometheus
text form (what Kafka exporters give operators).

- MET-01 live producer ids per partition: the producer state entries not expired, a proxy for
  the size of the producer id → sequence map;
- MET-02 the last stable offset per partition (with the high watermark and log start beside
  it: an LSO that stops moving while the high watermark grows is a stuck transaction or a lost
  marker);
- MET-03 transactional ids the coordinator holds, by state, a proxy for its memory;
- MET-05 each group's read_committed lag, measured against the LSO, not the high watermark.

``collect`` reads a consistent-enough picture without taking any lock (readers never wait,
DESIGN §3): each figure is as fresh as the files were when it was read. Used by
``txnlog metrics`` and by ``txnlog serve --metrics-port``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from txn_log.coordinator.transaction_state import state_name
from txn_log.errors import UnknownTopicOrPartitionError
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

PREFIX = "txnlog"


@dataclass(frozen=True)
class PartitionMetrics:
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    live_producer_ids: int
    ongoing_transactions: int


@dataclass(frozen=True)
class GroupLag:
    group: str
    topic: str
    partition: int
    committed_offset: int
    read_committed_lag: int


@dataclass(frozen=True)
class LogMetrics:
    partitions: tuple[PartitionMetrics, ...]
    transactional_ids: dict[str, int] | None  # state name -> count; None: coordinator busy
    groups: tuple[GroupLag, ...]


def partition_metrics(log: Log, tp: TopicPartition) -> PartitionMetrics:
    reader = log.partition_reader(tp)
    state = reader.producer_state
    return PartitionMetrics(
        tp.topic,
        tp.partition,
        reader.log_start_offset,
        reader.high_watermark,
        reader.last_stable_offset,
        len(state.active_producers()),
        len(state.ongoing_transactions()),
    )


def collect(log: Log) -> LogMetrics:
    """Every partition (internal topics included), the coordinator and every group."""
    partitions = []
    lso: dict[TopicPartition, int] = {}
    for topic in log.topics(include_internal=True):
        try:
            for tp in log.partitions(topic):
                metrics = partition_metrics(log, tp)
                partitions.append(metrics)
                lso[tp] = metrics.last_stable_offset
        except UnknownTopicOrPartitionError:
            continue  # deleted while we looked
    observed = log.coordinator.observe_transactions()  # never waits for a writer
    states = None if observed is None else Counter(state_name(md.state) for md in observed)
    groups = [
        GroupLag(
            group,
            tp.topic,
            tp.partition,
            committed.offset,
            max(lso[tp] - committed.offset, 0),
        )
        for group, offsets in sorted(log.group_offsets.groups().items())
        for tp, committed in sorted(offsets.items())
        if tp in lso
    ]
    counts = None if states is None else dict(sorted(states.items()))
    return LogMetrics(tuple(partitions), counts, tuple(groups))


_LABEL_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
"""Prometheus' text format: a label value's backslash, double quote and line feed escaped."""


def _labels(**labels: object) -> str:
    inner = ",".join(
        f'{key}="{str(value).translate(_LABEL_ESCAPES)}"' for key, value in labels.items()
    )
    return "{" + inner + "}"


_PARTITION_GAUGES = (
    ("partition_live_producer_ids", "live_producer_ids", "Producer ids with state."),
    ("partition_last_stable_offset", "last_stable_offset", "Last stable offset."),
    ("partition_high_watermark", "high_watermark", "High watermark (log end)."),
    ("partition_log_start_offset", "log_start_offset", "First offset kept."),
    ("partition_ongoing_transactions", "ongoing_transactions", "Open transactions."),
)


def render_prometheus(metrics: LogMetrics) -> str:
    """The Prometheus text exposition format (version 0.0.4)."""
    lines: list[str] = []
    for name, field, help_text in _PARTITION_GAUGES:
        lines += [f"# HELP {PREFIX}_{name} {help_text}", f"# TYPE {PREFIX}_{name} gauge"]
        for p in metrics.partitions:
            value = getattr(p, field)
            lines.append(f"{PREFIX}_{name}{_labels(topic=p.topic, partition=p.partition)} {value}")
    name = f"{PREFIX}_transactional_ids"
    lines += [f"# HELP {name} Transactional ids the coordinator holds, by state.",
              f"# TYPE {name} gauge"]  # fmt: skip
    for state, count in (metrics.transactional_ids or {}).items():
        lines.append(f"{name}{_labels(state=state)} {count}")
    name = f"{PREFIX}_coordinator_busy"
    lines += [f"# HELP {name} 1 when this scrape could not read the coordinator (held by a "
              "thread of the server); its figures are then left out.",
              f"# TYPE {name} gauge",
              f"{name} {int(metrics.transactional_ids is None)}"]  # fmt: skip
    name = f"{PREFIX}_group_read_committed_lag"
    lines += [f"# HELP {name} Last stable offset minus the committed offset.",
              f"# TYPE {name} gauge"]  # fmt: skip
    for g in metrics.groups:
        labels = _labels(group=g.group, topic=g.topic, partition=g.partition)
        lines.append(f"{name}{labels} {g.read_committed_lag}")
    return "\n".join(lines) + "\n"
