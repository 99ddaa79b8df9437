"""The log directory's format version (``txnlog.json``; DESIGN §2, §3): version 2 marks a log
whose writers count their holds of the partition and coordinator locks, so a build that does
not count (it reads version 1 only) refuses it instead of changing files that counting
writers trust unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txn_log.errors import ConfigError
from txn_log.log import Log
from txn_log.log_dir.log_format import COUNTED_HOLDS_VERSION, FORMAT_FILE, FORMAT_VERSION
from txn_log.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)


def _version(path: Path) -> object:
    return json.loads((path / FORMAT_FILE).read_text())["format_version"]


def test_a_new_log_is_of_the_version_whose_writers_count_their_holds(tmp_path: Path) -> None:
    with Log.open(tmp_path / "log"):
        pass
    assert FORMAT_VERSION == COUNTED_HOLDS_VERSION == 2
    assert _version(tmp_path / "log") == 2


def test_a_version_1_log_is_upgraded_by_its_first_writer_and_keeps_its_data(
    tmp_path: Path,
) -> None:
    """A log written before hold counts (version 1) opens, is marked version 2 before this
    process writes anything, and reads as before; a read-only open changes nothing."""
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 1)
        producer = log.producer()
        producer.send("orders", b"before", partition=0)
        producer.flush()
        producer.close()
    document = json.loads((path / FORMAT_FILE).read_text())
    (path / FORMAT_FILE).write_text(json.dumps({**document, "format_version": 1}))
    with Log.open(path, read_only=True) as log:
        assert log.consumer("read_uncommitted").end_offset(TP) == 1
    assert _version(path) == 1
    with Log.open(path) as log:
        assert _version(path) == 2
        assert json.loads((path / FORMAT_FILE).read_text()) == {**document, "format_version": 2}
        producer = log.producer()
        producer.send("orders", b"after", partition=0)
        producer.flush()
        producer.close()
        assert log.consumer("read_uncommitted").end_offset(TP) == 2


@pytest.mark.parametrize("version", [0, 3, "2", None])
def test_a_log_of_another_version_is_refused_naming_the_versions_read(
    tmp_path: Path, version: object
) -> None:
    path = tmp_path / "log"
    with Log.open(path):
        pass
    document = json.loads((path / FORMAT_FILE).read_text())
    (path / FORMAT_FILE).write_text(json.dumps({**document, "format_version": version}))
    with pytest.raises(
        ConfigError,
        match=r"format_version .* is not supported; this build "
        r"reads versions 1 and 2",
    ):
        Log.open(path)
    assert _version(path) == version
