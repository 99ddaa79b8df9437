"""What the sink reads from a Spark query's checkpoint directory (DESIGN §5).

    <checkpoint>/metadata            {"id": "<query id>"}   written when the query first starts
    <checkpoint>/offsets/<batchId>   line 1   "v1"                  (the offset log's version)
                                     line 2   {"batchWatermarkMs": ...}  (batch metadata)
                                     line 3+  one line per source: that source's end offsets
                                              for the batch, as the source serialised them,
                                              or "-" when the source had none

A txnlog (or Kafka) source writes ``{"<topic>": {"<partition>": <next offset>, ...}, ...}``;
those are the consumed offsets the sink commits under its group id. Lines of any other shape
(a rate source's ``5``, a file source's ``{"logOffset": 3}``) belong to other sources and are
skipped. Only local paths and ``file:`` URIs can be read: the embedded log is local too.
Pure functions over files; safe in any process.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

from offsets.partition_offsets import PartitionOffsets
from txn_log.errors import ConfigError

OFFSET_LOG_VERSION = "v1"
SourceOffsets = tuple[tuple[str, int, int], ...]
"""``(topic, partition, next offset)``, sorted."""


def local_path(location: str) -> Path | None:
    """The local path of a checkpoint location, or None for a non-local URI (hdfs:// ...)."""
    if "://" not in location and not location.startswith("file:"):
        return Path(location).expanduser()
    parsed = urlparse(location)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return Path(unquote(parsed.path))


def read_query_id(checkpoint_location: str) -> str | None:
    """The query id in ``<checkpoint>/metadata``, or None when there is none (yet)."""
    root = local_path(checkpoint_location)
    if root is None:
        return None
    try:
        document = json.loads((root / "metadata").read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read the query id from {root / 'metadata'}: {error}") from None
    query_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(query_id, str) or not query_id:
        raise ConfigError(f"{root / 'metadata'} holds no query id: {document!r}")
    return query_id


def parse_topic_offsets(line: str) -> SourceOffsets | None:
    """``(topic, partition, offset)`` of one source line shaped ``{"t": {"0": 42}}`` (the
    canonical offset JSON of ``offsets.partition_offsets``), else None (another source)."""
    try:
        positions = PartitionOffsets.from_json(line, what="source offsets")
    except ConfigError:
        return None
    if not len(positions):
        return None
    return tuple(
        sorted((tp.topic, tp.partition, offset) for tp, offset in positions.as_dict().items())
    )


def parse_offset_log(text: str, where: str = "offset log") -> SourceOffsets:
    """Every topic offset of every source line of one offset-log file (see module doc)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != OFFSET_LOG_VERSION:
        raise ConfigError(
            f"{where}: expected the offset log version {OFFSET_LOG_VERSION!r} on line 1, got "
            f"{lines[0][:40]!r}; expected shape: v1 / {{batch metadata}} / one line per source "
            'such as {"orders": {"0": 42, "1": 17}}'
        )
    merged: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        parsed = parse_topic_offsets(line.strip()) if line.strip() not in ("", "-") else None
        for topic, partition, offset in parsed or ():
            merged[(topic, partition)] = offset
    return tuple((t, p, o) for (t, p), o in sorted(merged.items()))


def read_source_offsets(checkpoint_location: str, batch_id: int) -> SourceOffsets:
    """The topic offsets consumed by ``batch_id``: empty when the checkpoint is not local or
    holds no such batch (a query without a topic-offset source commits no offsets)."""
    root = local_path(checkpoint_location)
    if root is None:
        return ()
    path = root / "offsets" / str(batch_id)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ()
    return parse_offset_log(text, str(path))
