"""``txnlog configs --describe|--alter`` (kafka-configs for an embedded log): the CLI runs the
engine's one alteration (``Log.incremental_alter_topic_config``, as ``txnlog serve`` does), so a
change made from the command line applies in a process that has the topic open (F-09), a dry
run writes nothing, and a bad value or entity is refused with exit code 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import directory_bytes
from tests.txn_log.cli.test_cli import txnlog
from tests.txn_log.processes.config_workers import Worker
from txn_log.log import Log


def make_log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    with Log.open(path, housekeeping_interval_ms=None) as log:
        log.create_topic("t", 1, {"retention.ms": "5000"})
    return path


def test_an_alteration_from_the_command_line_applies_in_a_process_writing_the_topic(
    tmp_path: Path,
) -> None:
    path = make_log(tmp_path)
    worker = Worker(path, "serve")
    try:
        assert worker.line() == {"step": "ready"}
        assert worker.append(2000)["ok"]
        done = txnlog(
            "configs", path, "--alter", "--entity-type", "topics", "--entity-name", "t",
            "--add-config", "max.message.bytes=1000,cleanup.policy=[compact,delete]",
            "--delete-config", "retention.ms",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Completed updating config for topic t.\n"
        refused = worker.append(2000)
        assert not refused["ok"] and refused["error"].startswith("RecordTooLargeError")
    finally:
        worker.stop()
    shown = json.loads(txnlog("configs", path, "--describe", "--entity-name", "t", "--json").stdout)
    assert shown == [
        {
            "topic": "t",
            "configs": {
                "cleanup.policy": {"value": "compact,delete", "source": "DYNAMIC_TOPIC_CONFIG"},
                "max.message.bytes": {"value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"},
            },
        }
    ]


def test_dry_run_shows_the_result_and_writes_nothing(tmp_path: Path) -> None:
    path = make_log(tmp_path)
    before = directory_bytes(path, content_only=True)
    done = txnlog(
        "configs", path, "--alter", "--entity-name", "t", "--add-config", "compression.type=zstd",
        "--append-config", "cleanup.policy=compact", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "nothing was written" in done.stdout
    assert "compression.type would be zstd" in done.stdout
    assert "cleanup.policy would be compact,delete" in done.stdout
    assert directory_bytes(path, content_only=True) == before


def test_describe_shows_overrides_and_with_all_every_key_and_its_source(tmp_path: Path) -> None:
    path = make_log(tmp_path)
    text = txnlog("configs", path, "--describe").stdout
    assert text == "Dynamic configs for topic t are:\n  retention.ms=5000 (DYNAMIC_TOPIC_CONFIG)\n"
    every = txnlog("configs", path, "--describe", "--all", "--entity-name", "t").stdout
    assert "  compression.type=producer (DEFAULT_CONFIG)\n" in every
    assert "  retention.ms=5000 (DYNAMIC_TOPIC_CONFIG)\n" in every


def test_bad_values_entities_and_usage_are_refused_with_exit_2_and_nothing_written(
    tmp_path: Path,
) -> None:
    path = make_log(tmp_path)
    before = directory_bytes(path, content_only=True)
    for args, message in (
        (["--add-config", "compression.type=brotli"], "valid values are uncompressed, zstd"),
        (["--add-config", "segment.bytes=" + "9" * 100_000], "'segment.bytes'"),
        (["--add-config", "no.such=1"], "unknown topic config 'no.such'"),
        (["--append-config", "retention.ms=1"], "because its type is not LIST"),
        (["--add-config", "retention.ms"], "is not KEY=VALUE"),
        ([], "--alter needs --add-config"),
        (["--entity-type", "users", "--add-config", "x=1"], "only topics and brokers have"),
        (["--entity-type", "brokers", "--add-config", "x=1"], "--entity-name 't': every"),
        (["--entity-default", "--add-config", "x=1"], "--entity-default goes with"),
    ):
        done = txnlog("configs", path, "--alter", "--entity-name", "t", *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr) < 2000
    missing = txnlog("configs", path, "--alter", "--entity-name", "nope", "--add-config", "a=1")
    assert missing.returncode == 2 and "'nope' does not exist" in missing.stderr
    internal = txnlog(
        "configs", path, "--alter", "--entity-name", "__consumer_offsets",
        "--add-config", "cleanup.policy=delete",
    )  # fmt: skip
    assert internal.returncode == 2 and "internal to txnlog" in internal.stderr
    assert directory_bytes(path, content_only=True) == before


def test_broker_configs_are_described_and_altered_as_kafka_configs_does(tmp_path: Path) -> None:
    """``--entity-type brokers``: the log's dynamic broker configs, broker 0 or the cluster
    default (``--entity-default``), the engine's one operation; a refusal names the key and
    writes nothing; the topic that sets no cleanup.policy shows the broker's, and its source."""
    path = make_log(tmp_path)
    done = txnlog(
        "configs", path, "--alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.cleanup.policy=[compact,delete],background.threads=4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating config for the cluster-wide default.\n"
    done = txnlog(
        "configs", path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
        "--add-config", "sasl.kerberos.min.time.before.relogin=58000",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    every = json.loads(
        txnlog("configs", path, "--describe", "--entity-type", "brokers", "--all", "--json").stdout
    )
    assert every == {
        "broker": "0",
        "configs": {
            "background.threads": {"value": "4", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"},
            "log.cleanup.policy": {
                "value": "compact,delete",
                "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
            },
            "sasl.kerberos.min.time.before.relogin": {
                "value": "58000",
                "source": "DYNAMIC_BROKER_CONFIG",
            },
        },
    }
    topic = txnlog("configs", path, "--describe", "--entity-name", "t", "--all").stdout
    assert "  cleanup.policy=compact,delete (DYNAMIC_DEFAULT_BROKER_CONFIG)\n" in topic
    before = directory_bytes(path, content_only=True)
    for args, message in (
        (["--entity-default", "--add-config", "sasl.kerberos.min.time.before.relogin=1"],
         "broker id must be specified"),
        (["--add-config", "log.retention.ms=1"], "Cannot update these configs dynamically"),
        (["--add-config", "background.threads=0"], "Value must be at least 1"),
        (["--entity-name", "3", "--add-config", "background.threads=2"], "broker 0"),
    ):  # fmt: skip
        refused = txnlog("configs", path, "--alter", "--entity-type", "brokers", *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    dry = txnlog(
        "configs", path, "--alter", "--entity-type", "brokers", "--delete-config",
        "sasl.kerberos.min.time.before.relogin", "--dry-run",
    )  # fmt: skip
    assert dry.returncode == 0 and "nothing was written" in dry.stdout
    assert directory_bytes(path, content_only=True) == before
    shown = txnlog("configs", path, "--describe", "--entity-type", "brokers", "--entity-default")
    assert shown.stdout == (
        "Dynamic configs for the cluster-wide default are:\n"
        "  background.threads=4 (DYNAMIC_DEFAULT_BROKER_CONFIG)\n"
        "  log.cleanup.policy=compact,delete (DYNAMIC_DEFAULT_BROKER_CONFIG)\n"
    )
