"""Transactional-id naming, the embedded backend's opening rules, and checkpoint reading."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from commit_protocol.embedded import EmbeddedBackend
from commit_protocol.messages import PartitionWrite, TaskCommit
from commit_protocol.naming import (
    is_task_transactional_id,
    task_transactional_id,
    validate_prefix,
)
from commit_protocol.spark_checkpoint import (
    local_path,
    parse_offset_log,
    parse_topic_offsets,
    read_query_id,
    read_source_offsets,
)
from txn_log.errors import ConfigError

METADATA = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}})


def test_task_transactional_ids() -> None:
    assert task_transactional_id("sink", 3) == "sink-3"
    assert is_task_transactional_id("sink", "sink-3")
    assert is_task_transactional_id("a.b*c", "a.b*c-12")
    for other in ("sink-", "sink-x", "sink-1-0", "sinks-1", "xsink-1", "sink"):
        assert not is_task_transactional_id("sink", other)
    with pytest.raises(ConfigError):
        task_transactional_id("sink", -1)


@pytest.mark.parametrize("prefix", ["", "   ", 7, "a\nb", "x" * 40_000])
def test_bad_prefixes_are_refused(prefix: object) -> None:
    with pytest.raises(ConfigError, match=r"transactional\.id\.prefix"):
        validate_prefix(prefix)


def test_task_commits_are_small_picklable_and_immutable() -> None:
    message = TaskCommit("s", 4, 1, 0, "p-1", 9, 2, (PartitionWrite("t", 0, 10, 1),))
    assert pickle.loads(pickle.dumps(message)) == message
    assert len(pickle.dumps(message)) < 400
    assert message.txn_ref.producer_epoch == 2 and message.record_count == 10
    with pytest.raises(AttributeError):
        message.batch_id = 5  # type: ignore[misc]


def test_a_missing_log_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"txnlog topics create .* --partitions"):
        EmbeddedBackend.open(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    backend = EmbeddedBackend.open(tmp_path / "new", create=True)
    assert EmbeddedBackend.open(tmp_path / "new").log is backend.log  # one Log per process
    backend.create_topic("t", 2)
    backend.create_topic("t", 5)  # exists already: not an error, not changed
    assert backend.partition_count("t") == 2 and backend.topic_exists("t")


def test_offset_log_lines_of_topic_sources_are_merged() -> None:
    text = "\n".join(
        ["v1", METADATA, '{"b":{"1":7,"0":3}}', "5", '{"logOffset":3}', "-", '{"a":{"0":1}}']
    )
    assert parse_offset_log(text) == (("a", 0, 1), ("b", 0, 3), ("b", 1, 7))


@pytest.mark.parametrize(
    "line", ["5", "[]", "{}", '{"t": 3}', '{"t": {"x": 1}}', '{"t": {"0": -1}}', "nope"]
)
def test_other_sources_lines_are_not_topic_offsets(line: str) -> None:
    assert parse_topic_offsets(line) is None


def test_a_bad_offset_log_names_the_expected_shape() -> None:
    with pytest.raises(ConfigError, match=r"v1.*\{\"orders\""):
        parse_offset_log("v2\n{}\n{}")


def test_checkpoint_files(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ck"
    assert read_query_id(str(checkpoint)) is None
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"abc-123"}')
    (checkpoint / "offsets" / "4").write_text(f'v1\n{METADATA}\n{{"src":{{"0":42}}}}')
    assert read_query_id(str(checkpoint)) == "abc-123"
    assert read_query_id(checkpoint.as_uri()) == "abc-123"
    assert read_source_offsets(str(checkpoint), 4) == (("src", 0, 42),)
    assert read_source_offsets(str(checkpoint), 5) == ()
    assert read_source_offsets("hdfs://nn/ck", 4) == ()
    assert local_path("file:///tmp/x%20y") == Path("/tmp/x y")
    (checkpoint / "metadata").write_text("{}")
    with pytest.raises(ConfigError, match="no query id"):
        read_query_id(str(checkpoint))
