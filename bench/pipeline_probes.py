"""txnlog's source and sink, and the do-nothing ends of ``bench_pipeline``, with their calls
timed inside Spark's processes (``pipeline_costs.py --probe DIR``).

Each call (a task's ``read`` or ``write``, the driver's ``latestOffset``, ``partitions``,
writer construction and ``commit``) appends its thread CPU time, wall time, process id and
start time to ``<DIR>/<call>.jsonl``; with ``probeProfile`` (``cpu`` or ``wall``) a cProfile
dump of thread CPU time, or of wall time with the waits, goes beside it. Spark's own work in
the same thread while the call runs (serializing the batches a read yields, deserializing
those a write takes) is inside the figure, so the do-nothing ends are timed the same way to
give Spark's share. The probe options (``probeDir``, ``probeProfile``, and ``probeMinRows`` /
``probeMaxRows``, which set the source's output batch bounds in the worker) are taken off
before txnlog parses its options.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_pipeline import KafkaBlankReader
from bench_sink import BlankReader, NullWriter, RowRange
from pyspark.sql.datasource import DataSource

from pyspark_txnlog import TxnLogDataSource
from txn_sink.writer import TxnLogStreamWriter
from txn_source.reader import TxnLogStreamReader
from txn_source.schema import kafka_schema

PROBE_KEYS = ("probedir", "probeprofile")
BLANK_SCHEMA = "key binary, value binary"


class Probe:
    """Thread CPU and wall time of one call (a task's read or write, the driver's planning or
    commit), appended to ``<dir>/<what>.jsonl``; with ``profile`` (``cpu``, ``wall``), a
    cProfile dump beside it.
    Spark's own work in the same process between the calls's start and end (serializing the
    rows a read yields, deserializing the rows a write takes) is inside the figure."""

    def __init__(self, directory: str, what: str, profile: str) -> None:
        self._directory = Path(directory)
        self._what = what
        self._profile = None  # "cpu": thread CPU time; "wall": waits included
        if profile in ("cpu", "wall"):
            timer = time.thread_time if profile == "cpu" else time.perf_counter
            self._profile = cProfile.Profile(timer)

    def mark(self, name: str) -> None:
        """Note when ``name`` happened (seconds from the call's start) and the CPU so far."""
        self._marks[name] = (time.perf_counter() - self._wall, time.thread_time() - self._cpu)

    def __enter__(self) -> Probe:
        self._marks: dict[str, tuple[float, float]] = {}
        self._wall, self._cpu, self._start = time.perf_counter(), time.thread_time(), time.time()
        if self._profile is not None:
            self._profile.enable()
        return self

    def __exit__(self, *exc_info: object) -> None:
        cpu, wall = time.thread_time() - self._cpu, time.perf_counter() - self._wall
        name = f"{self._what}-{os.getpid()}-{time.monotonic_ns()}"
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(str(self._directory / f"{name}.prof"))
        with open(self._directory / f"{self._what}.jsonl", "a") as out:
            record = {
                "cpu": cpu,
                "wall": wall,
                "pid": os.getpid(),
                "start": self._start,
                "marks": self._marks,
            }
            out.write(json.dumps(record) + "\n")


def _probe(options: Any, what: str) -> Any:
    if "probedir" not in options:
        return contextlib.nullcontext()
    return Probe(options["probedir"], what, options.get("probeprofile", ""))


class ProbedReader(TxnLogStreamReader):
    def __init__(self, options: Any, schema: Any) -> None:
        self._probe_options = {k: v for k, v in options.items() if k.startswith("probe")}
        super().__init__({k: v for k, v in options.items() if not k.startswith("probe")}, schema)

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        with _probe(self._probe_options, "driver-latestOffset"):
            return super().latestOffset(start, limit)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
        with _probe(self._probe_options, "driver-partitions"):
            return super().partitions(start, end)

    def read(self, partition: Any) -> Iterator[Any]:
        from txn_source import partition as module

        for key in ("MIN", "MAX"):
            given = self._probe_options.get(f"probe{key.lower()}rows")
            if given:
                setattr(module, f"{key}_ROWS_PER_BATCH", int(given))
        with _probe(self._probe_options, "task-read") as probe:
            for index, batch in enumerate(super().read(partition)):
                if index == 0 and probe is not None:
                    probe.mark("first batch")
                yield batch


class ProbedWriter(TxnLogStreamWriter):
    def __init__(self, options: Any, schema: Any, overwrite: bool) -> None:
        self._probe_options = {k: options[k] for k in PROBE_KEYS if k in options}
        given = {k: v for k, v in options.items() if not k.startswith("probe")}
        with _probe(self._probe_options, "driver-writer-init"):
            super().__init__(given, schema, overwrite)

    def write(self, iterator: Iterator[Any]) -> Any:
        with _probe(self._probe_options, "task-write") as probe:
            return super().write(_marked(iterator, probe))

    def commit(self, messages: list[Any], batchId: int) -> None:
        with _probe(self._probe_options, "driver-commit"):
            super().commit(messages, batchId)


def _marked(batches: Iterator[Any], probe: Any) -> Iterator[Any]:
    """``batches``, noting when the first arrived and when the last had (the rest of a write
    task's time is its own: the last batch, then flushing and preparing the transaction)."""
    for index, batch in enumerate(batches):
        if index == 0 and probe is not None:
            probe.mark("first input")
        yield batch
    if probe is not None:
        probe.mark("input done")


class ProbedTxnLog(TxnLogDataSource):
    @classmethod
    def name(cls) -> str:
        return "txnlog_probed"

    def schema(self) -> Any:
        return kafka_schema(False)

    def streamReader(self, schema: Any) -> Any:
        return ProbedReader(self.options, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        return ProbedWriter(self.options, schema, overwrite)


class ProbedBlankReader(KafkaBlankReader):
    def __init__(self, options: Any, kafka: bool) -> None:
        super().__init__(options)
        self._probe_options = {k: options[k] for k in PROBE_KEYS if k in options}
        self._kafka = kafka

    def read(self, partition: RowRange) -> Iterator[Any]:  # type: ignore[override]
        with _probe(self._probe_options, "task-read"):
            if self._kafka:
                yield from super().read(partition)
            else:
                yield from BlankReader.read(self, partition)


class ProbedBlank(DataSource):
    """``bench_blank`` (``kafka=true``: ``bench_blank_kafka``) with its reads timed."""

    @classmethod
    def name(cls) -> str:
        return "bench_blank_probed"

    def schema(self) -> Any:
        return kafka_schema(False) if self.options.get("kafka") == "true" else BLANK_SCHEMA

    def streamReader(self, schema: Any) -> ProbedBlankReader:
        return ProbedBlankReader(self.options, self.options.get("kafka") == "true")


class ProbedNullWriter(NullWriter):
    def __init__(self, options: Any) -> None:
        self._probe_options = {k: options[k] for k in PROBE_KEYS if k in options}

    def write(self, iterator: Iterator[Any]) -> Any:
        with _probe(self._probe_options, "task-write"):
            return super().write(iterator)


class ProbedNull(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_null_probed"

    def streamWriter(self, schema: Any, overwrite: bool) -> ProbedNullWriter:
        return ProbedNullWriter(self.options)
