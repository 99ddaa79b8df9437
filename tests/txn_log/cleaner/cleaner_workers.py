"""Worker programs for the cleaner's process tests, run as real OS processes.

Run as ``python -m tests.txn_log.cleaner.cleaner_workers ROLE LOG_DIR ...``:

    clean LOG_DIR                 run ``txnlog clean``'s cleaning of every compacted topic
                                  (``TXNLOG_CRASH_POINT`` may kill it at a swap step); prints
                                  the segments cleaned
    hold_cleaner LOG_DIR          take partition ``table-0``'s cleaner lock as a cleaner does,
                                  print ``held`` and sleep (a cleaner in the middle of its work)
    write LOG_DIR FIRST COUNT     write rounds FIRST.. (``write_rounds``), one line per round
    retain_loop LOG_DIR STOP_FILE apply partition ``table-0``'s retention again and again until
                                  STOP_FILE exists; prints ``deleted SEGMENTS``
    read_loop LOG_DIR STOP_FILE [held]
                                  read topic ``table`` partition 0 lock-free, from the log start
                                  to the LSO and from offsets inside it, again and again until
                                  STOP_FILE exists; checks each read (``check_read``,
                                  ``check_suffix``) and prints ``ok READS`` or the first
                                  violation. ``held``: through one reader kept open all along,
                                  pausing between reads (a long-lived view that lags behind, the
                                  segments it last read closed and merged meanwhile)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from txn_log.consumer.read_committed import AbortedTxnFilter
from txn_log.file_lock import FileLock
from txn_log.log import Log
from txn_log.record.codec import iter_records
from txn_log.storage.cleaner_swap import CLEANER_LOCK_FILE
from txn_log.storage.partition_reader import PartitionReader, open_partition_reader
from txn_log.topic_config import TopicConfig
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("table", 0)
KEYS = [b"k%d" % i for i in range(10)]


def value(key: bytes, round_: int, *, aborted: bool = False) -> bytes:
    return b"%s:%s:%d" % (b"aborted" if aborted else b"committed", key, round_)


def check_read(
    records: list[tuple[int, bytes | None, bytes | None]],
    later: tuple[list[tuple[int, bytes | None, bytes | None]], int] | None = None,
) -> str | None:
    """What a read_committed read of the whole log must show when every round is one committed
    transaction writing every key of ``KEYS`` and its own ``unique_key`` (``value``): offsets
    strictly increasing (no duplicate), no aborted value, every round's own key (those are
    never superseded), and no newest record of a key missing.

    Without ``later`` the log did not change since it was written: every key's newest value is
    from the newest round. With ``later`` = (a read made after this one, the end this one read
    to), the log may have grown meanwhile, and a cleaning may rightly have removed a record that
    a record past this read's end superseded: what must be here is each key's newest record in
    the later read, when it lies before this read's end (a record newest then was never
    superseded, so no cleaning could have removed it before).
    """
    offsets = [offset for offset, _, _ in records]
    if offsets != sorted(set(offsets)):
        return f"offsets not strictly increasing: {offsets}"
    newest: dict[bytes, int] = {}
    for offset, key, raw in records:
        if raw is None or key is None or not raw.startswith(b"committed:"):
            return f"offset {offset}: unexpected record {key!r}={raw!r}"
        newest[key] = int(raw.rsplit(b":", 1)[1])
    unique = {key for key in newest if key not in KEYS}
    top = max((int(key[1:]) for key in unique), default=-1)
    if unique != {unique_key(r) for r in range(top + 1)}:
        return f"a round's own key is missing: {sorted(unique)} up to round {top}"
    if later is None:
        rounds = {newest[key] for key in KEYS if key in newest}
        if newest and (not set(KEYS) <= set(newest) or rounds != {top}):
            return f"newest rounds per key disagree (a committed record is missing): {newest}"
        return None
    later_records, end = later
    latest = {key: offset for offset, key, _ in later_records}
    present = set(offsets)
    missing = sorted(o for o in latest.values() if o < end and o not in present)
    return f"newest records {missing} (below {end}) missing" if missing else None


def unique_key(round_: int) -> bytes:
    """The key only round ``round_`` writes: never superseded, so never cleaned away."""
    return b"u%d" % round_


def check_suffix(records: list[tuple[int, bytes | None, bytes | None]], start: int) -> str | None:
    """A read from ``start`` (through the offset index): increasing offsets from ``start`` on,
    committed values only."""
    offsets = [offset for offset, _, _ in records]
    if offsets != sorted(set(offsets)) or (offsets and offsets[0] < start):
        return f"read from {start}: offsets {offsets}"
    bad = [(o, v) for o, _, v in records if v is None or not v.startswith(b"committed:")]
    return f"read from {start}: unexpected records {bad}" if bad else None


def read_committed(
    log_dir: str, start: int | None = None, held: PartitionReader | None = None
) -> list[tuple[int, bytes | None, bytes | None]]:
    """What read_committed delivers from ``start`` (the log start when None) to the LSO."""
    return read_with_end(log_dir, start, held)[0]


def open_reader(log_dir: str) -> PartitionReader:
    directory = Path(log_dir) / TP.directory_name
    config = TopicConfig.from_mapping({"cleanup.policy": "compact"})
    return open_partition_reader(directory, TP, config, with_producer_state=True)


def read_with_end(
    log_dir: str, start: int | None = None, held: PartitionReader | None = None
) -> tuple[list[tuple[int, bytes | None, bytes | None]], int]:
    """``read_committed`` and the end (the LSO) it read to, through ``held`` if given (kept
    open), else through a reader opened for this read."""
    reader = open_reader(log_dir) if held is None else held
    try:
        end = reader.last_stable_offset
        start = reader.log_start_offset if start is None else start
        aborted = AbortedTxnFilter(reader.collect_aborted_txns(start, end))
        out: list[tuple[int, bytes | None, bytes | None]] = []
        for header, batch in reader.read(start, end):
            if header.is_control or aborted.is_aborted(header):
                continue
            out += [
                (r.offset, r.key, r.value) for r in iter_records(batch) if start <= r.offset < end
            ]
        return out, end
    finally:
        if held is None:
            reader.close()


def write_rounds(log: Log, first: int, count: int, *, announce: bool = False) -> None:
    """``count`` rounds: each a committed transaction writing every key of ``KEYS`` and its
    own ``unique_key``, then an aborted one (flushed, so its records reach the log; they must
    never be seen), then a roll so that cleaning has closed segments to swap."""
    producer = log.producer("writer")
    producer.init_transactions()
    partition = log.partition_log(TP)
    for round_ in range(first, first + count):
        for aborted in (False, True):
            producer.begin_transaction()
            for key in [*KEYS, unique_key(round_)]:
                producer.send(TP.topic, value(key, round_, aborted=aborted), key=key, partition=0)
            producer.flush()
            if aborted:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        partition.roll()
        if announce:
            print(round_, flush=True)
    producer.close()


def write(log_dir: str, first: str, count: str) -> None:
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        write_rounds(log, int(first), int(count), announce=True)


def retain_loop(log_dir: str, stop_file: str) -> None:
    deleted = 0
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        while not Path(stop_file).exists():
            deleted += len(log.partition_log(TP).delete_old_segments())
            time.sleep(0.005)
    print(f"deleted {deleted}", flush=True)


def hold_cleaner(log_dir: str) -> None:
    lock = FileLock(Path(log_dir) / TP.directory_name / CLEANER_LOCK_FILE)
    if not lock.try_acquire():
        raise SystemExit("the cleaner lock is already held")
    print("held", flush=True)
    time.sleep(600)


def clean(log_dir: str) -> None:
    with Log.open(log_dir, housekeeping_interval_ms=None) as log:
        stats = log.log_manager.clean(TP.topic)
    print(" ".join(str(base) for s in stats for base in s.segments_cleaned), flush=True)


def read_loop(log_dir: str, stop_file: str, mode: str = "") -> None:
    reads = 0
    held = open_reader(log_dir) if mode == "held" else None
    while not Path(stop_file).exists() or reads < 3:
        whole, end = read_with_end(log_dir, None, held)
        problem = check_read(whole, (read_committed(log_dir, None, held), end))
        for offset in range(0, end, max(end // 12, 1)):  # lookups through the offset index
            problem = problem or check_suffix(read_committed(log_dir, offset, held), offset)
        if problem is not None:
            print(f"violation after {reads} reads: {problem}", flush=True)
            return
        reads += 1
        if held is not None:  # lag behind: the segments it last read get closed and merged
            time.sleep(0.2)
    print(f"ok {reads}", flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    roles: dict[str, Callable[..., None]] = {
        "clean": clean,
        "read_loop": read_loop,
        "write": write,
        "hold_cleaner": hold_cleaner,
        "retain_loop": retain_loop,
    }
    roles[role](*args)
