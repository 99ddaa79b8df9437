"""``LogManager``: a log directory, its topics and their partitions (Kafka's LogManager).

    <log dir>/txnlog.json            {"format_version": 2, "created_ms": ..., "topic_ids": true}
    <log dir>/topics/<topic>.json    {"name", "topic_id", "partitions", "config", "created_ms"}
    <log dir>/<topic>-<partition>/   one PartitionLog each, stamped with partition.metadata

Topic metadata is written atomically (temp file, fsync, rename, directory fsync) under the log's
own lock; every process re-reads it when it meets a topic or partition it does not know yet, so
topics and partitions created by other processes are picked up without restarting.

This is the storage side of the engine (DESIGN §1): it knows the directory, the topics, the open
partitions, the clock and the producer-id blocks, and nothing above them. The coordinator, the
group offset store and the clients take a ``LogManager``; ``txn_log.log.Log`` wires them
together. A writable manager runs housekeeping (retention, producer-id expiration) for the
partitions it has open, periodically and on demand (``housekeeping``).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from txn_log.clock import SYSTEM_CLOCK, Clock
from txn_log.errors import (
    ConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    TxnLogError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from txn_log.fault_points import crash_point
from txn_log.file_lock import FileLock
from txn_log.log_dir.alter_configs import (
    AlterConfigOp,
    AlteredConfig,
    alter_config,
    defaults_for,
    stored_overrides,
)
from txn_log.log_dir.broker_config import BrokerConfig, BrokerConfigStore
from txn_log.log_dir.housekeeping import (
    DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND,
    DEFAULT_HOUSEKEEPING_INTERVAL_MS,
    Housekeeper,
    HousekeepingPass,
    validate_interval,
    validate_io_rate,
)
from txn_log.log_dir.log_format import (
    FORMAT_FILE,
    FORMAT_VERSION,
    needs_upgrade,
    read_format,
    upgraded,
)
from txn_log.log_dir.producer_id_manager import ProducerIdManager
from txn_log.log_dir.topic_config_watch import TopicConfigWatch
from txn_log.storage.delete_records import DeleteRecordsResult, delete_records
from txn_log.storage.durable_file import fsync_directory, make_directory, write_durably
from txn_log.storage.log_cleaner import CleanerStats, clean_partition
from txn_log.storage.partition_log import PartitionLog, partition_file_lock
from txn_log.storage.partition_metadata import FILE_NAME as PARTITION_METADATA_FILE
from txn_log.storage.partition_metadata import new_topic_id, write_partition_metadata
from txn_log.storage.partition_reader import PartitionReader, open_partition_reader
from txn_log.storage.throttler import Throttler
from txn_log.topic_config import (
    INTERNAL_TOPICS,
    TopicConfig,
    validate_topic_name,
)
from txn_log.topic_partition import TopicPartition

INTERNAL_SEGMENT_BYTES = 8 * 1024 * 1024
INTERNAL_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(INTERNAL_SEGMENT_BYTES),
    "max.compaction.lag.ms": str(24 * 3600 * 1000),
}
"""C-02: the transaction log and the offsets topic are compacted topics, in segments of 8 MiB.
The cleaner never cleans the active segment (B-17), so the segment size is what bounds their
disk beyond their live ids and groups: about two segments (the active one, and a rolled one
until the next housekeeping pass cleans it). Kafka's ``transaction.state.log.segment.bytes``
and ``offsets.topic.segment.bytes`` are 100 MiB, per partition of 50; here each is one
partition on one machine, and the cleaner merges its small cleaned segments (up to
``segment.bytes``), so smaller segments cost no more files. No record waits more than a day to
be cleaned (``max.compaction.lag.ms``, KIP-354): a quiet internal topic rolls its active
segment once its first batch is a day old and is cleaned whatever its dirty ratio. Topics
created before keep the segment.bytes they were created with."""

logger = logging.getLogger(__name__)

TOPICS_DIR = "topics"
MAX_PARTITIONS = 10_000
_META_PATHS_CACHED = 10_000  # topic file paths kept (names asked for may be anything: bounded)

DeletionGuard = Callable[[str], AbstractContextManager[object]]
"""Held around a topic's deletion (the coordinator's ``topic_deletion_guard``)."""


def write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``document`` so that readers see the old or the new file, whole,
    and a machine crash does not undo it (``durable_file``). Raises StorageError."""
    write_durably(path, json.dumps(document, sort_keys=True, indent=1).encode())


class LogManager:
    """An open log directory: its topics and partitions. Safe to share between threads; any
    number of processes may open the same directory at once."""

    def __init__(self, path: Path, clock: Clock, read_only: bool = False) -> None:
        self.path = path
        self.clock = clock
        self.read_only = read_only
        self._lock = FileLock(path / ".lock")
        self._mutex = threading.RLock()
        self._topics: dict[str, dict[str, Any]] = {}
        self._meta_paths: dict[str, Path] = {}  # topic -> its file (checked name), built once
        self._partitions: dict[TopicPartition, PartitionReader] = {}  # writers unless read_only
        self._config_watches: dict[str, TopicConfigWatch] = {}
        self.broker_configs = BrokerConfigStore(path, read_only=read_only)
        """The log's dynamic broker configs (``broker_config``), read by every topic's watch."""
        self.producer_ids = ProducerIdManager(path)
        self._housekeeper: Housekeeper | None = None
        self._cleaner_io_rate: float = DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False,
        housekeeping_interval_ms: int | None = DEFAULT_HOUSEKEEPING_INTERVAL_MS,
        cleaner_io_max_bytes_per_second: float = DEFAULT_CLEANER_IO_MAX_BYTES_PER_SECOND,
    ) -> LogManager:
        """Open the log at ``path``, creating the directory if it is missing or empty.

        Raises ConfigError when ``path`` is a file, or a non-empty directory that is not a log.
        ``read_only`` (inspection tools) never creates, truncates, completes or writes anything,
        and raises ConfigError unless ``path`` already is a log. A writable log runs a
        housekeeping pass every ``housekeeping_interval_ms`` (None: only ``run_housekeeping``),
        whose log cleaner reads and writes at most ``cleaner_io_max_bytes_per_second``.
        """
        interval_ms = validate_interval(housekeeping_interval_ms)
        io_rate = validate_io_rate(cleaner_io_max_bytes_per_second)
        root = Path(path)
        if read_only:
            return cls._open_read_only(root, clock)
        if root.exists() and not root.is_dir():
            raise ConfigError(f"log path {str(root)!r} is a file, not a txnlog directory")
        make_directory(root)  # durably: acknowledged topics and data live in it
        format_file = root / FORMAT_FILE
        if not format_file.exists():
            visible = [p.name for p in root.iterdir() if not p.name.startswith(".")]
            if visible:
                raise ConfigError(
                    f"path {str(root)!r} is not a txnlog directory (no {FORMAT_FILE}) and is not "
                    f"empty: it holds {', '.join(sorted(visible)[:5])}; point at a log directory "
                    "or at an empty or missing one to create a new log"
                )
            make_directory(root / TOPICS_DIR)
            log = cls(root, clock)
            with log._lock:
                if not format_file.exists():
                    for internal in sorted(INTERNAL_TOPICS):
                        if not log._meta_path(internal).exists():
                            log.create_topic(internal, config=INTERNAL_CONFIG, internal=True)
                    write_json_atomically(
                        format_file,
                        {
                            "format_version": FORMAT_VERSION,
                            "created_ms": clock.time_ms(),
                            "topic_ids": True,
                        },
                    )
            return log._start_housekeeping(interval_ms, io_rate)
        document = read_format(root)
        log = cls(root, clock)
        if needs_upgrade(document):
            log._upgrade_format()
        if not document.get("topic_ids"):
            log._stamp_topic_ids()
        log._compact_internal_topics()
        return log._start_housekeeping(interval_ms, io_rate)

    def _compact_internal_topics(self) -> None:
        """C-02: give internal topics of a log created before they were compacted
        ``cleanup.policy=compact``, and those created before KIP-354 here their
        ``max.compaction.lag.ms`` (once, under the log lock, each topic file rewritten
        atomically and durably). Other processes read the new config when they next open the
        partitions; their retention never deleted internal segments anyway."""
        stale = [
            name
            for name in sorted(INTERNAL_TOPICS)
            if self._meta_path(name).exists() and not self._has_internal_config(name)
        ]
        if not stale:
            return
        with self._lock:
            for name in stale:
                meta = json.loads(self._meta_path(name).read_text())
                config = TopicConfig.from_mapping(meta.get("config"))
                if self._has_internal_config(name, meta.get("config")):
                    continue  # another process upgraded it meanwhile
                lag = {"max.compaction.lag.ms": INTERNAL_CONFIG["max.compaction.lag.ms"]}
                # a compacted one keeps its own settings (segment.bytes...) and gains the lag
                added = lag if config.compact else INTERNAL_CONFIG
                upgraded = {**config.to_mapping(), **added}
                write_json_atomically(self._meta_path(name), {**meta, "config": upgraded})
                with self._mutex:
                    self._topics.pop(name, None)

    def _has_internal_config(self, name: str, stored: Mapping[str, Any] | None = None) -> bool:
        """Whether internal topic ``name`` is compacted with a compaction lag (C-02, KIP-354)."""
        if stored is None:
            stored = self._read_topic(name, refresh=True).get("config") or {}
        return TopicConfig.from_mapping(stored).compact and "max.compaction.lag.ms" in stored

    def _upgrade_format(self) -> None:
        """Mark a version-1 log version 2 before this process writes anything (once, under the
        log lock, the file replaced durably; ``log_format``)."""
        with self._lock:
            document = read_format(self.path)
            if needs_upgrade(document):
                write_json_atomically(self.path / FORMAT_FILE, upgraded(document))

    def _stamp_topic_ids(self) -> None:
        """Give every topic of a log written before topic ids its id and its partitions their
        ``partition.metadata`` (once, under the log lock; the format file records it)."""
        format_file = self.path / FORMAT_FILE
        with self._lock:
            document = json.loads(format_file.read_text())
            if document.get("topic_ids"):
                return
            for name in self.topics(include_internal=True):
                meta = json.loads(self._meta_path(name).read_text())
                topic_id = meta.get("topic_id") or new_topic_id()
                for partition in range(meta["partitions"]):
                    directory = self.path / TopicPartition(name, partition).directory_name
                    if directory.is_dir() and not (directory / PARTITION_METADATA_FILE).exists():
                        write_partition_metadata(directory, topic_id)
                if meta.get("topic_id") != topic_id:
                    write_json_atomically(self._meta_path(name), {**meta, "topic_id": topic_id})
            write_json_atomically(format_file, {**document, "topic_ids": True})

    @classmethod
    def _open_read_only(cls, root: Path, clock: Clock) -> LogManager:
        if not (root / FORMAT_FILE).is_file():
            parent = root.parent if root.parent.is_dir() else None
            logs = sorted(
                p.name for p in (parent.iterdir() if parent else ()) if (p / FORMAT_FILE).is_file()
            )
            raise ConfigError(
                f"no txnlog directory at {str(root)!r}"
                + (f" (logs in {str(parent)!r}: {', '.join(logs)})" if logs else "")
                + f"; create one with `txnlog init {shlex.quote(str(root))}`, or with a topic: "
                f"`txnlog topics create {shlex.quote(str(root))} <topic>`"
            )
        return cls(root, clock, read_only=True)

    # --- topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        internal: bool = False,
    ) -> None:
        """Create a topic; everything is validated before anything is written."""
        validate_topic_name(name)
        self._check_writable(f"create_topic({name!r})")
        if name in INTERNAL_TOPICS and not internal:
            raise InvalidTopicError(f"topic name {name!r} is reserved for txnlog's internal use")
        self.validate_partition_count(name, partitions)
        topic_config = TopicConfig.from_mapping(config)
        with self._lock:
            meta_path = self._meta_path(name)
            if meta_path.exists():
                raise TopicAlreadyExistsError(f"topic {name!r} already exists in {self.path}")
            topic_id = new_topic_id()
            for partition in range(partitions):
                self._make_partition_directory(TopicPartition(name, partition), topic_id)
            crash_point("topic.after_partition_dirs")
            document = {
                "name": name,
                "topic_id": topic_id,
                "partitions": partitions,
                "config": topic_config.to_mapping(),
                "config_overrides": sorted(config or {}),
                "created_ms": self.clock.time_ms(),
            }
            write_json_atomically(meta_path, document)
            with self._mutex:
                self._topics[name] = document
        for partition in range(partitions):  # every partition starts with its first segment
            self.partition_log(TopicPartition(name, partition))

    def _make_partition_directory(self, tp: TopicPartition, topic_id: str) -> None:
        """An empty partition directory stamped with its topic id; the caller holds the log
        lock. Leftovers of a deletion or creation that a crash interrupted are removed first:
        a new topic never inherits an old one's segments."""
        directory = self.path / tp.directory_name
        if directory.exists():
            shutil.rmtree(directory)
        make_directory(directory)  # durable before the topic file names it
        write_partition_metadata(directory, topic_id)

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka's CreatePartitions; never shrinks).

        Refused, with nothing written: an unknown topic (UnknownTopicOrPartitionError), an
        internal one (InvalidTopicError: the coordinators use partition 0 only), a count that
        is no increase or over ``MAX_PARTITIONS`` (InvalidPartitionsError, in Kafka's words).
        ``validate_only`` checks all that and writes nothing (CreatePartitions' validate_only).
        """
        self._check_writable(f"create_partitions({name!r})")
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"topic {name!r} is internal to txnlog and cannot grow")
        if validate_only:
            self._check_growth(name, self._read_topic(name, refresh=True)["partitions"], total)
            return
        with self._lock:
            document = dict(self._read_topic(name, refresh=True))
            self._check_growth(name, document["partitions"], total)
            for partition in range(document["partitions"], total):
                tp = TopicPartition(name, partition)
                self._make_partition_directory(tp, document["topic_id"])
            document["partitions"] = total
            write_json_atomically(self._meta_path(name), document)
            with self._mutex:
                self._topics[name] = document

    @classmethod
    def _check_growth(cls, name: str, current: int, total: int) -> None:
        """``total`` partitions would grow a topic of ``current`` (Kafka's words if not)."""
        if isinstance(total, int) and total == current:
            raise InvalidPartitionsError(f"topic {name!r} already has {current} partition(s)")
        if isinstance(total, int) and total < current:
            raise InvalidPartitionsError(
                f"topic {name!r} currently has {current} partition(s); {total} would not be "
                f"an increase"
            )
        cls.validate_partition_count(name, total)

    def delete_topic(self, name: str, guard: DeletionGuard, *, topic_id: str | None = None) -> int:
        """Delete a topic and all its data, holding ``guard(name)`` meanwhile; returns the
        number of partitions removed. With ``topic_id`` (Kafka's DeleteTopics by topic id),
        only the topic of that id: if the name now belongs to another topic (deleted and
        re-created meanwhile), UnknownTopicIdError and nothing is deleted.

        ``guard`` is the coordinator's ``topic_deletion_guard`` (``Log.delete_topic`` passes
        it): it refuses a topic an open transaction has written to and keeps any transaction
        from joining it until the deletion is done. Locks: the guard's (the coordinator lock),
        then the log lock, then each partition's; nothing waits for the coordinator while it
        holds the log lock, so this order cannot deadlock with the topic operations.

        The metadata file goes first, so no process finds the topic while its partitions are
        being removed. Each partition is then removed under its own lock, its
        ``partition.metadata`` first: a writer in another process that still has the partition
        open either appended before (its data is deleted with the topic) or finds the identity
        gone and writes nothing (UnknownTopicIdError) — never an acknowledged write into a
        deleted file. Internal topics cannot be deleted. Cached partitions are dropped, not
        closed: a reader thread may still be reading their files (descriptors close when it
        lets go).
        """
        self._check_writable(f"delete_topic({name!r})")
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"topic {name!r} is internal to txnlog and cannot be deleted")
        self._topic_to_delete(name, topic_id)  # unknown topic: that error, before the guard's
        with guard(name), self._lock:
            count = int(self._topic_to_delete(name, topic_id)["partitions"])
            self._meta_path(name).unlink()
            fsync_directory(self.path / TOPICS_DIR)
            crash_point("topic.after_meta_unlink")
            with self._mutex:
                self._topics.pop(name, None)
            for partition in range(count):
                tp = TopicPartition(name, partition)
                self._delete_partition_directory(self.path / tp.directory_name)
                with self._mutex:
                    self._partitions.pop(tp, None)
            return count

    def _topic_to_delete(self, name: str, topic_id: str | None) -> dict[str, Any]:
        """The topic's document, read afresh; with ``topic_id``, UnknownTopicIdError unless
        the topic of that id still holds the name."""
        try:
            document = self._read_topic(name, refresh=True)
        except UnknownTopicOrPartitionError as error:
            if topic_id is None:
                raise
            raise UnknownTopicIdError(f"no topic has id {topic_id} ({error})") from error
        if topic_id is not None and document.get("topic_id") != topic_id:
            raise UnknownTopicIdError(
                f"no topic has id {topic_id}: topic {name!r} now has topic id "
                f"{document.get('topic_id')} (deleted and re-created meanwhile)"
            )
        return document

    @staticmethod
    def _delete_partition_directory(directory: Path) -> None:
        """Remove one partition directory under the partition's lock (see ``delete_topic``)."""
        if not directory.is_dir():
            return
        lock = partition_file_lock(directory)
        try:
            with lock:
                (directory / PARTITION_METADATA_FILE).unlink(missing_ok=True)
                fsync_directory(directory)
                shutil.rmtree(directory, ignore_errors=True)
        finally:
            lock.close()

    def _check_writable(self, operation: str) -> None:
        if self.read_only:
            raise ConfigError(f"{operation} on a log opened read-only (for inspection)")

    @staticmethod
    def validate_partition_count(name: str, partitions: int) -> None:
        """InvalidPartitionsError unless ``partitions`` is an int from 1 to
        ``MAX_PARTITIONS`` (a topic's partitions; CreateTopics' validate_only asks too)."""
        if (
            not isinstance(partitions, int)
            or isinstance(partitions, bool)
            or not 1 <= partitions <= MAX_PARTITIONS
        ):
            raise InvalidPartitionsError(
                f"topic {name!r}: partitions must be an integer from 1 to {MAX_PARTITIONS}, "
                f"got {partitions!r}"
            )

    def topics(self, *, include_internal: bool = False) -> list[str]:
        """Every topic, sorted by name."""
        names = sorted(p.stem for p in (self.path / TOPICS_DIR).glob("*.json"))
        return [n for n in names if include_internal or n not in INTERNAL_TOPICS]

    def partitions(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions, in order (re-read, so partitions added elsewhere appear)."""
        count = self._read_topic(topic, refresh=True)["partitions"]
        return [TopicPartition(topic, p) for p in range(count)]

    def topic_config(self, topic: str) -> TopicConfig:
        """The topic's config as its file says now (a ``stat`` when unchanged: peers may alter
        it, ``alter_topic_config``); UnknownTopicOrPartitionError if there never was one. A
        topic deleted since it was last read keeps its last config."""
        try:
            return self._config_watch(topic).current()
        except FileNotFoundError:
            with self._mutex:  # a name never read keeps no watch (names may be anything)
                self._config_watches.pop(topic, None)
            self._read_topic(topic, refresh=True)  # raises, naming the topics there are
            raise

    def _config_watch(self, topic: str) -> TopicConfigWatch:
        with self._mutex:
            watch = self._config_watches.get(topic)
            if watch is None:
                path, store = self._meta_path(topic), self.broker_configs
                derived: tuple[BrokerConfig, Mapping[str, str]] | None = None

                def defaults() -> Mapping[str, str]:
                    # derived once per version of the broker config (``current`` returns the
                    # same object while its file is unchanged), so the watch's look at an
                    # unchanged file costs its one ``stat``
                    nonlocal derived
                    config = store.current()
                    if derived is None or derived[0] is not config:
                        taken = config.topic_defaults(topic)
                        derived = (config, {k: v for k, (v, _) in taken.items()})
                    return derived[1]

                internal = topic in INTERNAL_TOPICS  # never a broker default: not even looked at
                watch = TopicConfigWatch(path, None if internal else defaults)
                self._config_watches[topic] = watch
            return watch

    def topic_config_overrides(self, topic: str) -> frozenset[str]:
        """The keys of the topic's config set explicitly, at creation or since (Kafka's
        topic-level overrides; ``alter_configs.stored_overrides``), read afresh."""
        document = self._read_topic(topic, refresh=True)
        return stored_overrides(document, defaults_for(topic, INTERNAL_CONFIG))

    def alter_topic_config(
        self,
        name: str,
        ops: Sequence[AlterConfigOp],
        *,
        replace: bool = False,
        validate_only: bool = False,
    ) -> TopicConfig:
        """Change topic ``name``'s config (Kafka's AlterConfigs with ``replace``, else
        IncrementalAlterConfigs; ``alter_configs`` has the rules) and return the new config.

        Refused with nothing written: an unknown topic (UnknownTopicOrPartitionError), an
        invalid operation or value, or a key of an internal topic the engine depends on
        (InvalidConfigError). ``validate_only`` checks all that and writes nothing. The change
        is computed from the file read afresh under the log lock, the lock every topic change
        holds (so two peers' alterations, or an alteration and a growth, never undo each
        other), and the file replaced atomically and durably. Every process applies it at
        its next operation on the topic (``topic_config_watch``): appends, rolls, retention
        and the cleaner, in this process and the others, without reopening.
        """
        self._check_writable(f"alter_topic_config({name!r})")
        if validate_only:
            document = self._read_topic(name, refresh=True)
            altered = alter_config(
                name, document, ops, replace=replace, internal_config=INTERNAL_CONFIG
            )
            return self._with_broker_defaults(name, altered)
        with self._lock:
            document = self._read_topic(name, refresh=True)
            altered = alter_config(
                name, document, ops, replace=replace, internal_config=INTERNAL_CONFIG
            )
            changed = {**document, **altered.document_fields()}
            write_json_atomically(self._meta_path(name), changed)
            with self._mutex:
                self._topics[name] = changed
        return self._with_broker_defaults(name, altered)

    def _with_broker_defaults(self, name: str, altered: AlteredConfig) -> TopicConfig:
        """``altered``'s config as the topic's watch will give it: the dynamic broker
        defaults over the keys it does not set."""
        taken = self.broker_configs.current().topic_defaults(name)
        given = {key: value for key, (value, _) in taken.items() if key not in altered.overrides}
        return TopicConfig.from_mapping({**altered.config.to_mapping(), **given})

    def topic_id(self, topic: str) -> str | None:
        """The topic's id in Kafka's printed form, read afresh (None only on a log opened
        read-only that predates topic ids); UnknownTopicOrPartitionError if there is none."""
        topic_id = self._read_topic(topic, refresh=True).get("topic_id")
        return None if topic_id is None else str(topic_id)

    def _meta_path(self, topic: str) -> Path:
        path = self._meta_paths.get(topic)
        if path is None:
            path = self.path / TOPICS_DIR / f"{validate_topic_name(topic)}.json"
            if len(self._meta_paths) < _META_PATHS_CACHED:
                self._meta_paths[topic] = path
        return path

    def _read_topic(self, topic: str, *, refresh: bool = False) -> dict[str, Any]:
        with self._mutex:
            if refresh or topic not in self._topics:
                try:
                    self._topics[topic] = json.loads(self._meta_path(topic).read_text())
                except FileNotFoundError:
                    existing = self.topics()
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} does not exist in {self.path}; existing topics: "
                        f"{', '.join(existing) if existing else '(none)'}"
                    ) from None
            return self._topics[topic]

    # --- partitions ------------------------------------------------------------------------------

    def partition_log(self, topic_partition: TopicPartition) -> PartitionLog:
        """The (cached) PartitionLog of an existing partition, to write it (and read it).

        ConfigError on a log opened read-only, whose partitions are readers only
        (``partition_reader``). Otherwise as ``partition_reader``.
        """
        self._check_writable(f"partition_log({topic_partition}) (read with partition_reader)")
        partition = self.partition_reader(topic_partition)
        if not isinstance(partition, PartitionLog):  # a writable log opens writers only
            raise ConfigError(f"{topic_partition}: opened read-only, cannot be written")
        return partition

    def partition_reader(self, topic_partition: TopicPartition) -> PartitionReader:
        """The (cached) partition of an existing partition, to read it: the PartitionLog on a
        writable log, a lock-free PartitionReader with producer state on a read-only one.

        A cached partition whose topic was deleted, or deleted and re-created, since it was
        opened is dropped (its identity read again, and a ``stat`` of the topic file: a
        deletion killed after removing that file leaves the partition's identity as it was):
        the answer is always the partition of the topic that exists now, or
        UnknownTopicOrPartitionError.

        A partition is opened only after the topic's file is read afresh, and only if its
        directory carries that file's topic id: a directory no topic file names (left by a
        ``create_topic`` killed before its file was written, which the next creation of the
        name removes) is never written, read, or acknowledged in by a process that still
        knows the topic's previous incarnation.
        """
        with self._mutex:
            cached = self._partitions.get(topic_partition)
            if cached is not None:
                if cached.is_current() and self._meta_path(topic_partition.topic).exists():
                    return cached
                del self._partitions[topic_partition]  # not closed: readers may hold it
            document = self._read_topic(topic_partition.topic, refresh=True)
            count = document["partitions"]
            if topic_partition.partition >= count:
                raise UnknownTopicOrPartitionError(
                    f"partition {topic_partition.partition} of topic {topic_partition.topic!r} "
                    f"does not exist; valid partitions are 0..{count - 1}"
                )
            watch = self._config_watch(topic_partition.topic)
            config = watch.current()
        # opened outside the mutex: other threads' partitions are not held up by its I/O
        directory = self.path / topic_partition.directory_name
        opened: PartitionReader
        if self.read_only:
            opened = open_partition_reader(
                directory, topic_partition, config, clock=self.clock, with_producer_state=True
            )
        else:
            opened = PartitionLog.open(
                directory, topic_partition, config, clock=self.clock, create=False,
                verifies_transactions=True,
            )  # fmt: skip
        self._check_owned(opened, document)
        opened.follow_config(watch.current)  # a config peers alter applies without reopening
        with self._mutex:
            raced = self._partitions.get(topic_partition)
            if raced is not None and raced.is_current():
                opened.close()  # another thread opened it meanwhile; nobody has seen ours
                return raced
            self._partitions[topic_partition] = opened
            return opened

    def _check_owned(self, opened: PartitionReader, document: Mapping[str, Any]) -> None:
        """Close ``opened`` and raise UnknownTopicOrPartitionError unless its directory has the
        topic id of the topic's file (read again once: the topic may have been re-created
        between the read and the open)."""
        tp = opened.topic_partition
        for attempt in range(2):
            expected = document.get("topic_id")
            if expected is None or opened.topic_id in (None, expected):
                return
            if attempt == 0:
                try:
                    document = self._read_topic(tp.topic, refresh=True)
                except UnknownTopicOrPartitionError:
                    opened.close()
                    raise
        opened.close()
        raise UnknownTopicOrPartitionError(
            f"{tp}: its directory belongs to topic id {opened.topic_id}, but topic "
            f"{tp.topic!r} has topic id {document.get('topic_id')} (a creation of the topic was "
            "interrupted, or it was deleted or re-created meanwhile); nothing was read or written"
        )

    # --- housekeeping ----------------------------------------------------------------------------

    def _start_housekeeping(self, interval_ms: int | None, io_rate: float) -> LogManager:
        self._cleaner_io_rate = io_rate
        self._housekeeper = Housekeeper(
            self.path, self.clock, self._open_partitions(), interval_ms,
            cleaner_io_max_bytes_per_second=io_rate,
        )  # fmt: skip
        return self

    def _open_partitions(self) -> Callable[[], list[tuple[TopicPartition, PartitionLog]]]:
        """The partitions this log has open, as the housekeeper asks for them, after opening
        the internal topics' (any process holding the log open keeps them cleaned, C-02): by
        a weak reference, so that a log dropped without ``close()`` can still be collected."""
        manager = weakref.ref(self)

        def partitions() -> list[tuple[TopicPartition, PartitionLog]]:
            target = manager()
            if target is None:
                return []
            target._open_internal_partitions()
            with target._mutex:
                return [
                    (tp, partition)
                    for tp, partition in target._partitions.items()
                    if isinstance(partition, PartitionLog)  # all of them: a writable log
                ]

        return partitions

    def _open_internal_partitions(self) -> None:
        for name in sorted(INTERNAL_TOPICS):
            try:
                for tp in self.partitions(name):
                    self.partition_log(tp)
            except (TxnLogError, OSError) as problem:  # reported, and tried again next pass
                logger.warning("housekeeping could not open %s: %s", name, problem)

    def run_housekeeping(self) -> HousekeepingPass:
        """Run one housekeeping pass now over the partitions this log has open: retention
        (T-10, B-09) and producer-id expiration (P-26, P-27); see ``housekeeping``.

        Never waits for a writer: skipped (``ran`` False) while another process runs a pass;
        partitions a writer holds are listed in ``busy``. ConfigError on a read-only log.
        """
        self._check_writable("run_housekeeping")
        with self._mutex:
            if self._housekeeper is None:
                self._housekeeper = Housekeeper(
                    self.path, self.clock, self._open_partitions(), None,
                    cleaner_io_max_bytes_per_second=self._cleaner_io_rate,
                )  # fmt: skip
            housekeeper = self._housekeeper
        return housekeeper.run_once()

    def clean(
        self, topic: str | None = None, *, force: bool = True, throttler: Throttler | None = None
    ) -> list[CleanerStats]:
        """Run the log cleaner now on every partition of ``topic`` (every compacted topic,
        internal ones included, when None): ``txnlog clean``. ``force`` cleans whatever the
        dirty ratio; a partition another process is cleaning is reported as skipped; an on-demand
        cleaning is not throttled unless given a ``throttler``. Waits
        for writers only for each segment's short swap. ConfigError on a read-only log."""
        self._check_writable("clean")
        names = [topic] if topic is not None else self.topics(include_internal=True)
        stats: list[CleanerStats] = []
        for name in names:
            if topic is None and not self.topic_config(name).compact:
                continue
            for tp in self.partitions(name):
                partition = self.partition_log(tp)
                stats.append(
                    clean_partition(
                        partition, self.clock.time_ms(), force=force, throttler=throttler
                    )
                )
        return stats

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """Kafka's DeleteRecords: move each partition's log start offset forward to its offset
        (-1: the high watermark), durably (``PartitionLog.delete_records``); per partition its
        low watermark, or the typed error that refused it (``storage.delete_records``: an
        unknown partition, an internal topic, a policy without ``delete``, an offset outside
        [0, high watermark]). ConfigError on a read-only log, before anything changes."""
        self._check_writable("delete_records")
        return delete_records(
            offsets, lambda tp, offset: self.partition_log(tp).delete_records(offset)
        )

    def close(self) -> None:
        """Stop housekeeping, then close every open partition and the log lock."""
        if self._housekeeper is not None:
            self._housekeeper.stop()  # first: a pass in progress uses the partitions
        with self._mutex:
            for log in self._partitions.values():
                log.close()
            self._partitions.clear()
            for watch in self._config_watches.values():
                watch.close()
            self.broker_configs.close()
            self._lock.close()
