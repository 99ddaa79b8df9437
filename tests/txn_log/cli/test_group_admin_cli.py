"""``txnlog groups reset-offsets``, ``delete`` and ``delete-offsets`` (kafka-consumer-groups),
run as processes: each scenario, clamping to the log's bounds as Kafka does, the dry run that
writes nothing, and every refusal in one line naming what is wrong and what would be valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import directory_bytes
from tests.txn_log.cli.test_cli import txnlog
from txn_log.log import Log
from txn_log.topic_partition import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
SECOND = 1000  # record timestamps: 1 s, 2 s, ... after the epoch


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """orders-0 holds 5 records stamped 1..5 s after the epoch, orders-1 none; group g has
    offset 2 on orders-0."""
    path = tmp_path / "log"
    with Log.open(path) as log:
        log.create_topic("orders", 2)
        producer = log.producer()
        for i in range(5):
            producer.send("orders", b"v%d" % i, partition=0, timestamp_ms=(i + 1) * SECOND)
        producer.flush()
        producer.close()
        log.group_offsets.commit("g", {P0: 2})
    return path


def reset(log_dir: Path, *options: str) -> dict[str, Any]:
    result = txnlog("groups", "reset-offsets", log_dir, "--group", "g", *options, "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def new_offsets(document: dict[str, Any]) -> dict[str, int]:
    return {f"{r['topic']}-{r['partition']}": r["new_offset"] for r in document["offsets"]}


def committed(log_dir: Path) -> dict[TopicPartition, int]:
    with Log.open(log_dir, read_only=True) as log:
        return {tp: om.offset for tp, om in log.group_offsets.groups().get("g", {}).items()}


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (["--to-earliest"], {"orders-0": 0, "orders-1": 0}),
        (["--to-latest"], {"orders-0": 5, "orders-1": 0}),
        (["--to-current"], {"orders-0": 2}),
        (["--to-offset", "3"], {"orders-0": 3, "orders-1": 0}),  # orders-1 clamped down to 0
        (["--to-datetime", "1970-01-01T00:00:03Z"], {"orders-0": 2, "orders-1": 0}),
        (["--to-datetime", "1970-01-01T00:00:02.500+00:00"], {"orders-0": 2, "orders-1": 0}),
        (["--by-duration", "PT1H"], {"orders-0": 5, "orders-1": 0}),  # all older: the end
        (["--shift-by", "2"], {"orders-0": 4}),
        (["--shift-by", "-9"], {"orders-0": 0}),  # clamped up to the log start
        (["--shift-by", "9"], {"orders-0": 5}),  # clamped down to the log end
    ],
)
def test_each_scenario_plans_kafkas_offset_and_the_dry_run_writes_nothing(
    log_dir: Path, scenario: list[str], expected: dict[str, int]
) -> None:
    topics = (
        ["--topic", "orders:0"]
        if scenario[0] in ("--shift-by", "--to-current")
        else ["--topic", "orders"]
    )
    before = directory_bytes(log_dir)
    planned = reset(log_dir, *topics, *scenario)
    assert planned["executed"] is False
    assert new_offsets(planned) == expected
    assert directory_bytes(log_dir) == before  # a dry run: not a byte changed
    executed = reset(log_dir, *topics, *scenario, "--execute")
    assert new_offsets(executed) == expected
    assert {str(tp): o for tp, o in committed(log_dir).items()} == {"orders-0": 2, **expected}


def test_the_plan_is_a_table_and_a_clamped_target_is_a_warning(log_dir: Path) -> None:
    result = txnlog(
        "groups", "reset-offsets", log_dir, "--group", "g", "--all-topics", "--to-offset", "99"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "GROUP  TOPIC   PARTITION  NEW_OFFSET",
        "g      orders  0          5",
        "Dry run: nothing was written; add --execute to commit these offsets.",
    ]
    assert "orders-0: target clamped down to log end 5" in result.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--topic", "nope", "--to-earliest"], "topic 'nope'"),
        (
            ["--topic", "orders:0,7", "--to-earliest"],
            "partition 7 of topic 'orders' does not exist; valid partitions are 0..1",
        ),
        (["--topic", "orders:x", "--to-earliest"], "'x' is not a partition number"),
        (
            ["--topic", "orders", "--shift-by", "1"],
            "cannot shift-by for orders-1: group has no "
            "committed offset there (valid: --to-earliest (0), --to-latest (0)",
        ),
        (["--all-topics", "--by-duration", "1h"], "is not an ISO-8601 duration PnDTnHnMnS"),
        (["--all-topics", "--to-datetime", "yesterday"], "is not YYYY-MM-DDTHH:mm:SS.sss"),
        (["--all-topics", "--to-offset", "-1"], "--to-offset -1 must be an offset ≥ 0"),
        (["--all-topics", "--to-offset", "x"], "--to-offset takes a whole number, got 'x'"),
        (["--all-topics", "--to-earliest", "--dry-run", "--execute"], "not allowed with"),
        (["--all-topics", "--topic", "orders", "--to-earliest"], "not allowed with"),
        (["--all-topics", "--to-earliest", "--to-latest"], "not allowed with"),
    ],
)
def test_refusals_name_what_is_wrong_and_change_nothing(
    log_dir: Path, options: list[str], message: str
) -> None:
    before = directory_bytes(log_dir, content_only=True)
    result = txnlog("groups", "reset-offsets", log_dir, "--group", "g", *options, "--execute")
    assert result.returncode == 2, result
    assert message in result.stderr
    assert directory_bytes(log_dir, content_only=True) == before
    assert committed(log_dir) == {P0: 2}


def test_delete_refuses_an_unknown_group_naming_the_groups_there_are(log_dir: Path) -> None:
    before = directory_bytes(log_dir, content_only=True)
    result = txnlog("groups", "delete", log_dir, "--group", "nope")
    assert result.returncode == 1
    assert "GroupIdNotFoundError: group 'nope' has no committed offsets; groups: g" in result.stderr
    assert directory_bytes(log_dir, content_only=True) == before
    result = txnlog("groups", "delete", log_dir, "--group", "g")
    assert result.returncode == 0 and "'g' was successful" in result.stdout
    assert committed(log_dir) == {}


def test_delete_offsets_deletes_the_partitions_named_and_refuses_what_kafka_refuses(
    log_dir: Path,
) -> None:
    """kafka-consumer-groups --delete-offsets: each partition named is Successful, and only
    those lose their offsets; an unknown group, topic or partition changes nothing."""
    with Log.open(log_dir) as log:
        log.group_offsets.commit("g", {P1: 4})
    before = directory_bytes(log_dir, content_only=True)
    for options, code, message in [
        (["--group", "nope", "--topic", "orders"], 1, "GroupIdNotFoundError: group 'nope'"),
        (["--group", "g", "--topic", "ghost"], 2, "topic 'ghost' does not exist"),
        (["--group", "g", "--topic", "orders:7"], 2, "valid partitions are 0..1"),
    ]:
        result = txnlog("groups", "delete-offsets", log_dir, *options)
        assert (result.returncode, message in result.stderr) == (code, True), result
    assert directory_bytes(log_dir, content_only=True) == before
    result = txnlog("groups", "delete-offsets", log_dir, "--group", "g", "--topic", "orders:1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "Request succeeded for deleting offsets from group g."
    assert "orders" in result.stdout and "Successful" in result.stdout
    assert committed(log_dir) == {P0: 2}
    result = txnlog(
        "groups", "delete-offsets", log_dir, "--group", "g", "--topic", "orders", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "group": "g",
        "offsets": [
            {"topic": "orders", "partition": 0, "status": "Successful", "had_offset": True},
            {"topic": "orders", "partition": 1, "status": "Successful", "had_offset": False},
        ],
    }
    assert committed(log_dir) == {}
