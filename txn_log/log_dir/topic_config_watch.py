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

The keys the topic does not set itself (its file's ``config_overrides``) take the log's
dynamic broker defaults where there are some (``broker_config``: ``log.cleanup.policy`` for
``cleanup.policy``), asked for at each look (``defaults``: one more ``stat``, of the broker
config file), so a broker default changed by any process applies at the next operation too.

Thread-safe: one lock per watch around the check and the re-read.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from txn_log.log_dir.alter_configs import defaults_for, stored_overrides
from txn_log.storage.held_file import HeldFile
from txn_log.topic_config import TopicConfig

TopicDefaults = Callable[[], Mapping[str, str]]
"""Topic config key → value the topic takes when it does not set the key itself; the same
object again while they are unchanged is cheaper (compared by identity first), never
changed in place."""
_NO_DEFAULTS: Mapping[str, str] = {}


class TopicConfigWatch:
    """The config in one topic file, read again only when the file was replaced, with the
    dynamic defaults ``defaults`` gives over the keys the topic does not set."""

    def __init__(self, path: Path, defaults: TopicDefaults | None = None) -> None:
        self.path = path
        self._defaults = defaults
        self._lock = threading.Lock()
        self._file = HeldFile(path)  # the file last read, held open
        self._stored: dict[str, Any] | None = None  # the file's config, every key
        self._overrides: frozenset[str] = frozenset()  # the keys the topic sets itself
        self._config: TopicConfig | None = None
        self._defaults_used: Mapping[str, str] = _NO_DEFAULTS

    def current(self) -> TopicConfig:
        """The topic's config now. FileNotFoundError when the file is missing and was never
        read; InvalidConfigError when its config does not parse (the last good one is kept
        for the next call to fall back on only if the file changes back)."""
        with self._lock:
            defaults = self._defaults() if self._defaults is not None else _NO_DEFAULTS
            if self._stored is None or self._file.changed():
                self._read()
            if self._config is None or (
                defaults is not self._defaults_used and defaults != self._defaults_used
            ):
                taken = {k: v for k, v in defaults.items() if k not in self._overrides}
                self._config = TopicConfig.from_mapping({**(self._stored or {}), **taken})
                self._defaults_used = defaults
            return self._config

    def _read(self) -> None:
        """Read the file as it is now; a missing one keeps what was read before."""
        version = self._file.open_current()
        if version is None:
            self._file.release()  # deleted: keep the last config, free the inode
            if self._stored is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.path))
            return
        try:  # never rewritten in place: replaced whole
            document = json.loads(version.read())
            stored = TopicConfig.from_mapping(document.get("config")).to_mapping()
            overrides = stored_overrides(document, defaults_for(self.path.stem, {}))
        except BaseException:
            version.close()
            raise
        self._file.keep(version)
        self._stored, self._overrides, self._config = stored, overrides, None

    def close(self) -> None:
        """Close the held file; the watch can still be used (it reads the file again)."""
        with self._lock:
            self._file.release()
