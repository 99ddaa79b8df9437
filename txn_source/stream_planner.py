"""The driver side of a streaming read: initial offsets, how far each micro-batch goes, and its
read tasks. Spark's ``KafkaMicroBatchStream`` logic, over either mode's view (``source_view``).

- ``latest_offset`` never passes the readable end (the LSO under read_committed), so an open
  transaction holds the stream at its first offset until it ends; never goes back from
  ``start``; applies admission control (``offsets.admission``); and under
  Trigger.AvailableNow stops at the target fixed by ``fix_target`` (data added later waits for
  the next run). ``minOffsetsPerTrigger`` is ignored under AvailableNow, which must end.
- Partitions that appear while the query runs join ``latest_offset`` and are read from 0
  (``planning``).
- Batch 0 plans the same on a re-run. Spark keeps no initial offset of a Python source in the
  checkpoint: a driver killed before batch 0 commits calls ``initialOffset`` again at the
  restart and plans batch 0 from that start to the end the checkpoint kept. A start of
  ``latest`` (the stream default, or -1 in JSON offsets) is therefore not resolved there but
  kept as the marker -1 (``LATEST``): ``latest_offset`` takes it as the readable end when it
  plans, and ``plan`` as the batch's own end, so batch 0 is empty in both runs and the stream
  starts at batch 0's end (resolved at the restart instead, it lay past that end: every
  restart failed "the offset went back", or with failOnDataLoss=false batch 0's records were
  skipped). A partition named by a marker and gone from the end is not data loss: it never
  held a position.

State (the log view, the last trigger time, the AvailableNow target, the last latest offsets) is
per planning process and never pickled. Not thread-safe; Spark calls it from one thread.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import InputPartition

from offsets.admission import AdmissionLimit, available, rate_limit, should_delay
from offsets.offset_spec import LATEST, LatestOffsets, SpecificOffsets
from offsets.partition_offsets import PartitionOffsets
from offsets.resolve import resolve
from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_source.options import SourceOptions, spec_option_name
from txn_source.planning import NEW_PARTITION_START, plan_input_partitions
from txn_source.source_view import open_view

logger = logging.getLogger(__name__)


class StreamPlanner:
    """Offsets and read tasks of one streaming query."""

    def __init__(self, options: SourceOptions, clock: Clock = SYSTEM_CLOCK) -> None:
        self.options = options
        self._clock = clock
        self._view = open_view(options)
        self._last_trigger_ms = 0
        self._target: PartitionOffsets | None = None
        self.latest: PartitionOffsets | None = None

    def initial_offsets(self) -> PartitionOffsets:
        """``startingOffsets`` (or the timestamp options) resolved for today's partitions,
        except that ``latest`` stays the marker -1 (module docstring)."""
        spec = self.options.starting
        partitions = self._view.partitions(self.options.subscription)
        if isinstance(spec, LatestOffsets):
            return PartitionOffsets.of({tp: LATEST for tp in partitions})
        resolved = resolve(
            spec,
            partitions,
            self._view,
            option=spec_option_name(spec, "starting"),
            starting=True,
            no_match=self.options.no_match,
        )
        if isinstance(spec, SpecificOffsets):
            latest = {tp for tp, offset in spec.offsets.entries if offset == LATEST}
            marked = {tp: LATEST if tp in latest else o for tp, o in resolved.entries}
            return PartitionOffsets.of(marked)
        return resolved

    def fetch_latest(self) -> PartitionOffsets:
        """The readable end of every partition the query reads now."""
        partitions = self._view.partitions(self.options.subscription)
        return PartitionOffsets.of(self._view.latest_offsets(partitions))

    def fix_target(self) -> None:
        """Trigger.AvailableNow: read up to what is readable now, and no further."""
        self._target = self.fetch_latest()
        logger.info("Trigger.AvailableNow target: %s", self._target)

    def latest_offset(self, start: PartitionOffsets, limit: AdmissionLimit) -> PartitionOffsets:
        """The end of the next micro-batch; ``start`` itself when there is nothing to read."""
        latest = self._target if self._target is not None else self.fetch_latest()
        self.latest = latest
        begin = settle_markers(start, latest).as_dict()
        end = {tp: max(offset, begin.get(tp, NEW_PARTITION_START)) for tp, offset in latest.entries}
        if self._target is not None:  # partitions that appeared after the target: not this run
            end.update({tp: offset for tp, offset in begin.items() if tp not in end})
        elif limit.min_rows is not None:
            now = self._clock.time_ms()
            if should_delay(limit, available(begin, end), now, self._last_trigger_ms):
                return start
            self._last_trigger_ms = now
        if limit.max_rows is not None:
            end = rate_limit(limit.max_rows, begin, end)
        return PartitionOffsets.of(end)

    def plan(self, start: PartitionOffsets, end: PartitionOffsets) -> list[InputPartition]:
        return plan_input_partitions(self._view, self.options, settle_markers(start, end), end)

    def close(self) -> None:
        self._view.close()


def settle_markers(start: PartitionOffsets, at: PartitionOffsets) -> PartitionOffsets:
    """``start`` with each ``latest`` marker (-1) taken as ``at``'s offset of its partition,
    and dropped where ``at`` has none (module docstring); other offsets as they are."""
    settled = {
        tp: at[tp] if offset == LATEST else offset
        for tp, offset in start.entries
        if offset != LATEST or tp in at
    }
    return PartitionOffsets.of(settled)
