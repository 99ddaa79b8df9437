"""``TopicConfigWatch``: a topic's config as its file says now, for every process (DESIGN §3).

A topic's config lives in ``topics/<topic>.json``, which every change replaces whole by a
rename (``durable_file``: a new file, a new inode). Each process keeps one watch per topic and
its partitions ask it for the config at the start of each operation
(``PartitionReader.refresh_config``): an append, each write under a partition lock (rolls,
markers, retention, the cleaner's steps), a cleaning, a read's inflation bound. So a config
another process altered (``LogManager.alter_topic_config``) applies at this process's next
operation on the topic, with no reopening and no daemon.

The check is one ``stat`` of the file (``storage.held_file``: the file last read is held
open, so no newer file can be given its inode number). A changed file is read through the
descriptor opened for it, so the identity and the bytes are of the same file. When the file is
gone (the topic deleted) the last config read stays in force and the descriptor is closed; a
file appearing again under the name (the topic re-created) is read afresh.

Thread-safe: one lock per watch around the check and the re-read.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

from txn_log.storage.held_file import HeldFile
from txn_log.topic_config import TopicConfig


class TopicConfigWatch:
    """The config in one topic file, read again only when the file was replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = HeldFile(path)  # the file last read, held open
        self._config: TopicConfig | None = None

    def current(self) -> TopicConfig:
        """The topic's config now. FileNotFoundError when the file is missing and was never
        read; InvalidConfigError when its config does not parse (the last good one is kept
        for the next call to fall back on only if the file changes back)."""
        with self._lock:
            if self._config is not None and not self._file.changed():
                return self._config
            version = self._file.open_current()
            if version is None:
                self._file.release()  # deleted: keep the last config, free the inode
                if self._config is None:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.path))
                return self._config
            try:  # never rewritten in place: replaced whole
                config = TopicConfig.from_mapping(json.loads(version.read()).get("config"))
            except BaseException:
                version.close()
                raise
            self._file.keep(version)
            self._config = config
            return config

    def close(self) -> None:
        """Close the held file; the watch can still be used (it reads the file again)."""
        with self._lock:
            self._file.release()
