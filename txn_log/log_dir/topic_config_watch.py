"""``TopicConfigWatch``: a topic's config as its file says now, for every process (DESIGN §3).

A topic's config lives in ``topics/<topic>.json``, which every change replaces whole by a
rename (``durable_file``: a new file, a new inode). Each process keeps one watch per topic and
its partitions ask it for the config at the start of each operation
(``PartitionReader.refresh_config``): an append, each write under a partition lock (rolls,
markers, retention, the cleaner's steps), a cleaning, a read's inflation bound. So a config
another process altered (``LogManager.alter_topic_config``) applies at this process's next
operation on the topic, with no reopening and no daemon.

The check is one ``stat`` of the file: the watch holds the file it last read open, which pins
its inode (no file created meanwhile can be given it), so the file was replaced exactly when
the inode behind the name differs from the held one. Timestamps and sizes, which can coincide
across two quick writes, are never compared. A changed file is read through the descriptor
opened for it, so the identity and the bytes are of the same file. When the file is gone (the
topic deleted) the last config read stays in force and the descriptor is closed; a file
appearing again under the name (the topic re-created) is read afresh.

Thread-safe: one lock per watch around the check and the re-read.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from txn_log.owned_fd import owned_fd
from txn_log.storage.file_io import pread_fully
from txn_log.topic_config import TopicConfig


class TopicConfigWatch:
    """The config in one topic file, read again only when the file was replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._close_fd: Callable[[], object] | None = None  # the file last read, held open
        self._inode: tuple[int, int] | None = None  # (st_dev, st_ino) of that file
        self._config: TopicConfig | None = None

    def current(self) -> TopicConfig:
        """The topic's config now. FileNotFoundError when the file is missing and was never
        read; InvalidConfigError when its config does not parse (the last good one is kept
        for the next call to fall back on only if the file changes back)."""
        with self._lock:
            try:
                stat = os.stat(self.path)
            except FileNotFoundError:
                self._release()  # deleted: keep the last config, free the inode
                if self._config is None:
                    raise
                return self._config
            if self._config is not None and self._inode == (stat.st_dev, stat.st_ino):
                return self._config
            return self._read()

    def _read(self) -> TopicConfig:
        fd = os.open(self.path, os.O_RDONLY)
        close = owned_fd(self, fd)
        try:
            stat = os.fstat(fd)
            data = pread_fully(fd, stat.st_size, 0)  # never rewritten in place: replaced whole
            config = TopicConfig.from_mapping(json.loads(data).get("config"))
        except BaseException:
            close()
            raise
        self._release()
        self._close_fd, self._inode, self._config = close, (stat.st_dev, stat.st_ino), config
        return config

    def _release(self) -> None:
        if self._close_fd is not None:
            self._close_fd()
            self._close_fd, self._inode = None, None

    def close(self) -> None:
        """Close the held file; the watch can still be used (it reads the file again)."""
        with self._lock:
            self._release()
