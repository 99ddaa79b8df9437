"""The Spark readers: thin adapters from Spark's Python Data Source API to the planning in
``stream_planner`` / ``planning`` and the executor read in ``partition`` (STYLE item 12).

Options are parsed in the constructor, on the driver, and fail fast. A reader is pickled to
the executors inside the read function, so its driver-side state (the open log) is created
lazily and never pickled; ``read`` uses only the partition it is given.

Admission control: Python read limits cannot be combined (there is no ``CompositeReadLimit``),
so the default limit carries ``maxOffsetsPerTrigger`` when it is set, else
``minOffsetsPerTrigger``; the other one, and ``maxTriggerDelay``, come from the options
whenever Spark passes anything but ``ReadAllAvailable`` (which always means: everything).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from offsets.admission import AdmissionLimit
from offsets.offset_spec import LATEST
from offsets.partition_offsets import PartitionOffsets
from offsets.resolve import resolve
from txn_log.errors import ConfigError, TxnLogError
from txn_log.topic_partition import TopicPartition
from txn_source.kafka_partition import KafkaInputPartition, read_kafka_partition
from txn_source.options import (
    SourceOptions,
    check_location,
    parse_source_options,
    spec_option_name,
)
from txn_source.partition import read_partition
from txn_source.planning import plan_input_partitions
from txn_source.source_view import SourceView, open_view
from txn_source.stream_planner import StreamPlanner


class TxnLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("txnlog")``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_source_options(options, streaming=True)
        check_location(self.options)
        self.schema = schema
        self._planner: StreamPlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> StreamPlanner:
        if self._planner is None:
            self._planner = StreamPlanner(self.options)
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        return self.planner.initial_offsets().to_dict()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        admission = admission_limit(limit, self.options.admission)
        return self.planner.latest_offset(_position(start, start=True), admission).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_read_limit(self.options.admission)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        latest = self.planner.latest
        return latest.to_dict() if latest is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.fix_target()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self.planner.plan(_position(start, start=True), _position(end))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_any(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the query's checkpoint is the only record of progress."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


def stream_reader(options: Mapping[str, str], schema: StructType) -> DataSourceStreamReader:
    """The stream reader for ``options``, or, when they are refused, one that raises the
    refusal from its first call. pyspark 4.3's streaming source runner builds the reader
    inside a ``try`` whose ``finally`` calls ``reader.stop()`` (python_streaming_source_runner
    ``main``): a constructor that raises leaves ``reader`` unbound, and the user saw our
    ``ConfigError`` chained under an ``UnboundLocalError``. Raised from ``initialOffset``, the
    first call, it reaches the query alone, as early (issue 26 item 3)."""
    try:
        return TxnLogStreamReader(options, schema)
    except TxnLogError as refused:
        return RefusedStreamReader(refused)


class RefusedStreamReader(DataSourceStreamReader):
    """A stream whose options were refused: every call raises the refusal; ``stop`` does
    nothing (nothing was opened)."""

    def __init__(self, refused: TxnLogError) -> None:
        self.refused = refused

    def initialOffset(self) -> dict[str, Any]:
        raise self.refused

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise self.refused

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        raise self.refused

    def read(self, partition: InputPartition) -> Iterator[Any]:
        raise self.refused

    def commit(self, end: dict[str, Any]) -> None:
        raise self.refused

    def stop(self) -> None:
        """Nothing to release."""


class TxnLogBatchReader(DataSourceReader):
    """``spark.read.format("txnlog")``: from ``startingOffsets`` (default earliest) to
    ``endingOffsets`` (default latest, the LSO under read_committed)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_source_options(options, streaming=False)
        check_location(self.options)
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        with open_view(self.options) as view:
            partitions = view.partitions(self.options.subscription)
            start = _resolve(view, self.options, partitions, starting=True)
            end = _resolve(view, self.options, partitions, starting=False)
            _check_start_before_end(start, end)
            return list(plan_input_partitions(view, self.options, start, end))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_any(partition)


def read_any(partition: InputPartition) -> Iterator[Any]:
    """An executor's read of a task of either mode."""
    if isinstance(partition, KafkaInputPartition):
        return read_kafka_partition(partition)
    return read_partition(partition)


def admission_limit(limit: ReadLimit, configured: AdmissionLimit) -> AdmissionLimit:
    """The admission control for one ``latestOffset`` call (see the module docstring)."""
    delay = configured.max_trigger_delay_ms
    if isinstance(limit, ReadAllAvailable):
        return AdmissionLimit(max_trigger_delay_ms=delay)
    if isinstance(limit, ReadMaxRows):
        return AdmissionLimit(limit.max_rows, configured.min_rows, delay)
    if isinstance(limit, ReadMinRows):
        return AdmissionLimit(configured.max_rows, limit.min_rows, delay)
    raise ConfigError(
        f"the txnlog source limits micro-batches by offsets (rows), not by {limit!r}; valid "
        "read limits are ReadAllAvailable, ReadMaxRows, ReadMinRows"
    )


def default_read_limit(configured: AdmissionLimit) -> ReadLimit:
    if configured.max_rows is not None:
        return ReadMaxRows(configured.max_rows)
    if configured.min_rows is not None:
        return ReadMinRows(configured.min_rows)
    return ReadAllAvailable()


def _position(offsets: dict[str, Any], *, start: bool = False) -> PartitionOffsets:
    """An offset Spark passed; a batch's start may hold the ``latest`` marker (-1) that
    ``initialOffset`` gives (``stream_planner``)."""
    return PartitionOffsets.from_dict(
        offsets, what="the offset Spark passed to the source", min_value=LATEST if start else 0
    )


def _resolve(
    view: SourceView, options: SourceOptions, partitions: list[TopicPartition], *, starting: bool
) -> PartitionOffsets:
    spec = options.starting if starting else options.ending
    return resolve(
        spec,
        partitions,
        view,
        option=spec_option_name(spec, "starting" if starting else "ending"),
        starting=starting,
        no_match=options.no_match,
    )


def _check_start_before_end(start: PartitionOffsets, end: PartitionOffsets) -> None:
    for tp, offset in start.entries:
        if offset > end[tp]:
            raise ConfigError(
                f"the starting offset of {tp} ({offset}) is after its ending offset "
                f"({end[tp]}); startingOffsets must not pass endingOffsets"
            )
