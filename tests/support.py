"""Helpers shared by the test suites."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txn_log.log import Log


def directory_bytes(path: Path, *, content_only: bool = False) -> dict[str, bytes]:
    """Every file below ``path`` and its bytes, by relative name: a snapshot to compare before
    and after an operation that must change nothing.

    ``content_only`` leaves out lock files and empty files (those that merely opening a log or
    a partition creates).
    """
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not (content_only and (p.name.endswith(".lock") or not p.stat().st_size))
    }


def open_transaction(
    log: Log,
    transactional_id: str,
    sends: list[tuple[str, int, bytes]],
    *,
    transaction_timeout_ms: int = 60_000,
) -> Any:
    """A producer of ``log`` whose transaction holds ``(topic, partition, value)`` records,
    flushed to the log and left open (neither committed nor aborted)."""
    producer = log.producer(transactional_id, transaction_timeout_ms)
    producer.init_transactions()
    producer.begin_transaction()
    for topic, partition, value in sends:
        producer.send(topic, value, partition=partition)
    producer.flush()
    return producer


def override_internal_config(path: Path, overrides: dict[str, str]) -> None:
    """Rewrite the internal topics' config files of the log at ``path`` with ``overrides``
    directly, e.g. a lower ``segment.bytes`` so that a short run rolls them as a long history
    would (``Log.incremental_alter_topic_config`` does this for the keys it lets change on an
    internal topic; this raw rewrite takes any). Only with no process holding the log open,
    right after its creation."""
    from txn_log.log_dir.log_manager import TOPICS_DIR, write_json_atomically
    from txn_log.topic_config import INTERNAL_TOPICS

    for name in sorted(INTERNAL_TOPICS):
        meta_path = path / TOPICS_DIR / f"{name}.json"
        meta = json.loads(meta_path.read_text())
        write_json_atomically(meta_path, {**meta, "config": {**meta["config"], **overrides}})
