"""``txnlog.json``: the log directory's format version, checked by every writable open, and
its one upgrade (DESIGN §2, §3).

    <log dir>/txnlog.json   {"format_version": 2, "created_ms": ..., "topic_ids": true}

1. The layout of DESIGN §2.
2. The same files, and a promise about their writers: each partition's and the coordinator's
   lock file carries a hold count (its first 8 bytes, ``file_lock``), which every holder
   that may change what the lock guards bumps before its first change; a writer that finds
   no other hold counted since its own last one trusts its caches and skips its catch-up
   (``PartitionLog._write_locked``, the coordinator's state). A build that does not count
   would append, mark or roll unseen by such a writer, which would then write at the end it
   last knew: over the other's batch. So a version-2 log must never be written by such a
   build, and builds before the count read version 1 only: they refuse to open it.

A writable open of a version-1 log marks it version 2 (under the log lock, the file replaced
durably) before its process writes anything. A process of an older build that opened the log
before that keeps writing uncounted: stop them all before the first process of a counting
build opens their log. A read-only open reads either version and changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from txn_log.errors import ConfigError

FORMAT_FILE = "txnlog.json"
COUNTED_HOLDS_VERSION = 2
"""The first version whose writers count their holds (module docstring)."""
FORMAT_VERSION = COUNTED_HOLDS_VERSION
"""The version this build writes."""
READABLE_VERSIONS = (1, COUNTED_HOLDS_VERSION)


def read_format(path: Path) -> dict[str, Any]:
    """The format document of the log at ``path`` (its directory); ConfigError, naming the
    file and the versions this build reads, when its version is not one of them."""
    format_file = path / FORMAT_FILE
    document: dict[str, Any] = json.loads(format_file.read_text())
    version = document.get("format_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise ConfigError(
            f"{format_file}: format_version {version!r} is not supported; this build reads "
            f"versions {' and '.join(str(v) for v in READABLE_VERSIONS)}"
        )
    return document


def needs_upgrade(document: dict[str, Any]) -> bool:
    """Whether a writer must mark the log version 2 before it writes (module docstring)."""
    return bool(document["format_version"] < COUNTED_HOLDS_VERSION)


def upgraded(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` marked with this build's version, everything else kept."""
    return {**document, "format_version": FORMAT_VERSION}
