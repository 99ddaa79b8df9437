"""Dynamic broker configs through a real ``txnlog serve``: confluent-kafka's AdminClient
``alter_configs`` / ``incremental_alter_configs`` / ``describe_configs`` of a BROKER resource
(librdkafka's 0081 sets ``sasl.kerberos.min.time.before.relogin``, ``background.threads`` and
``log.cleanup.policy``), the raw client for the cluster-wide default and what the AdminClient
will not send, ``log.cleanup.policy`` applied to a topic without its own, a GROUP resource
answered as Kafka below 4.0 answers it, and two processes altering at once, neither change
lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from tests.support import directory_bytes
from tests.txn_wire.serve_process import ServeProcess
from tests.txn_wire.test_admin_configs_wire import (
    ALTER_CONFIGS,
    BROKER,
    INCREMENTAL_ALTER_CONFIGS,
    INVALID_REQUEST,
    SET,
    WAIT_S,
    admin,
    codes,
    described,
    outcomes,
    raw_alter,
    resource,
)
from tests.txn_wire.wire_clients import RawClient
from txn_log.log import Log

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # on purpose
DESCRIBE_CONFIGS, GROUP = 32, 32
POLICY, THREADS, RELOGIN = (
    "log.cleanup.policy",
    "background.threads",
    "sasl.kerberos.min.time.before.relogin",
)


def broker(*entries: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    return ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries
        ],
    )


def broker_configs(client: Any) -> dict[str, tuple[str, ConfigSource]]:
    [future] = client.describe_configs([ConfigResource("broker", "0")]).values()
    return {k: (e.value, ConfigSource(e.source)) for k, e in future.result(WAIT_S).items()}


def test_0081s_broker_alterations_answer_no_error_and_describe_shows_them(
    server: ServeProcess, log_dir: Path
) -> None:
    client = admin(server)
    assert broker_configs(client) == {
        POLICY: ("delete", ConfigSource.DEFAULT_CONFIG),
        THREADS: ("10", ConfigSource.DEFAULT_CONFIG),
        RELOGIN: ("60000", ConfigSource.DEFAULT_CONFIG),
    }
    legacy = ConfigResource("broker", "0", set_config={RELOGIN: "58000"})
    assert codes(client.alter_configs([legacy])) == {"0": 0}
    first = broker(
        (THREADS, "9", AlterConfigOpType.SET), (POLICY, "compact", AlterConfigOpType.APPEND)
    )
    assert codes(client.incremental_alter_configs([first])) == {"0": 0}
    dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG
    assert broker_configs(client) == {
        POLICY: ("compact,delete", dynamic),
        THREADS: ("9", dynamic),
        RELOGIN: ("58000", dynamic),
    }
    # the cleanup.policy of a topic that sets none is the broker's now, in every process
    assert described(client, "orders")["cleanup.policy"] == ("compact,delete", dynamic)
    with Log.open(log_dir, read_only=True) as log:
        assert log.topic_config("orders").cleanup_policy == "compact,delete"
    back = broker(
        (THREADS, "", AlterConfigOpType.DELETE), (POLICY, "compact", AlterConfigOpType.SUBTRACT)
    )
    assert codes(client.incremental_alter_configs([back])) == {"0": 0}
    shown = broker_configs(client)
    assert shown[THREADS] == ("10", ConfigSource.DEFAULT_CONFIG)
    assert shown[POLICY] == ("delete", dynamic)
    assert described(client, "orders")["cleanup.policy"] == ("delete", dynamic)


def test_the_cluster_default_and_refusals_in_kafkas_words(
    server: ServeProcess, log_dir: Path
) -> None:
    """The cluster-wide default ("") is below broker 0 and above Kafka's default; a per-broker
    key there, an unknown key, a key Kafka does not change dynamically and a bad value are
    INVALID_REQUEST naming the key (Kafka's broker-side validation), nothing written."""
    answers = raw_alter(
        server.port,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [resource("", [{"name": THREADS, "config_operation": SET, "value": "4"}], BROKER)],
    )
    assert [a["error_code"] for a in answers] == [0]
    client = admin(server)
    assert broker_configs(client)[THREADS] == ("4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    before = directory_bytes(log_dir, content_only=True)
    refused = raw_alter(
        server.port,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [
            resource("", [{"name": RELOGIN, "config_operation": SET, "value": "1"}], BROKER),
            resource(
                "0", [{"name": "log.retention.ms", "config_operation": SET, "value": "1"}], BROKER
            ),
        ],
    )
    assert [a["error_code"] for a in refused] == [INVALID_REQUEST, INVALID_REQUEST]
    assert "at default cluster level, broker id must be specified" in refused[0]["error_message"]
    assert f"'{RELOGIN}'" in refused[0]["error_message"]
    assert (
        "Cannot update these configs dynamically: 'log.retention.ms'" in refused[1]["error_message"]
    )
    for key, value, message in [
        (THREADS, "0", "Invalid value '0' for configuration background.threads"),
        (POLICY, "forever", "Invalid value 'forever' for configuration log.cleanup.policy"),
        ("broker.id", "3", "Cannot update these configs dynamically: 'broker.id'"),
    ]:
        bad = ConfigResource("broker", "0", set_config={key: value})
        [(code, text)] = outcomes(client.alter_configs([bad])).values()
        assert code == INVALID_REQUEST and message in text, text
    assert directory_bytes(log_dir, content_only=True) == before
    raw = RawClient(server.port)
    asked = {
        "resources": [
            {"resource_type": BROKER, "resource_name": "0", "configuration_keys": [THREADS]},
            {"resource_type": BROKER, "resource_name": "", "configuration_keys": None},
            {"resource_type": BROKER, "resource_name": "5", "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": True,
    }
    mine, default, other = raw.request(DESCRIBE_CONFIGS, 4, asked)["results"]
    raw.close()
    [threads] = mine["configs"]
    assert [(s["value"], s["source"]) for s in threads["synonyms"]] == [("4", 3), ("10", 5)]
    assert "not applied: txnlog has no background thread pool" in threads["documentation"]
    assert [(c["name"], c["value"], c["config_source"]) for c in default["configs"]] == [
        (THREADS, "4", 3)
    ]
    assert other["error_code"] == INVALID_REQUEST


def test_a_group_resource_is_invalid_request_as_kafka_answers_it_below_4_0(
    server: ServeProcess,
) -> None:
    """librdkafka's 0081 expects INVALID_REQUEST for a GROUP resource from a broker below 4.0
    (its runner assumes 3.9.0): group configs (KIP-848) are not served here."""
    group = [{"name": "consumer.session.timeout.ms", "config_operation": SET, "value": "50000"}]
    [answer] = raw_alter(
        server.port, INCREMENTAL_ALTER_CONFIGS, 1, [resource("my-group", group, GROUP)]
    )
    assert answer["error_code"] == INVALID_REQUEST
    [legacy] = raw_alter(server.port, ALTER_CONFIGS, 2, [resource("my-group", group[:1], GROUP)])
    assert legacy["error_code"] == INVALID_REQUEST


ALTERER = """
import sys
from txn_log.log import Log
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType
lost = []
with Log.open(sys.argv[1], housekeeping_interval_ms=None) as log:
    print("ready", flush=True)
    sys.stdin.readline()
    for value in range(1, int(sys.argv[2]) + 1):
        log.broker_configs.alter("0", [AlterConfigOp(sys.argv[3], OpType.SET, str(value))])
        if log.broker_configs.current().configs["0"].get(sys.argv[3]) != str(value):
            lost.append(value)
print(lost)
"""


def test_two_processes_altering_at_once_lose_neither_change(
    server: ServeProcess, log_dir: Path
) -> None:
    """A process alters ``background.threads`` through the engine while the server alters the
    Kerberos key for an AdminClient, each many times, each reading its change back at once:
    no change is ever undone by the other's, and both last values are there (each change is
    a read-modify-write under the editor lock)."""
    rounds = 25
    other = subprocess.Popen(
        [sys.executable, "-c", ALTERER, str(log_dir), str(rounds * 4), THREADS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client, lost = admin(server), []
    broker_configs(client)  # connected
    assert other.stdin is not None and other.stdout is not None
    assert other.stdout.readline() == "ready\n"
    other.stdin.write("go\n")
    other.stdin.flush()
    for value in range(60_001, 60_001 + rounds):
        step = broker((RELOGIN, str(value), AlterConfigOpType.SET))
        assert codes(client.incremental_alter_configs([step])) == {"0": 0}
        if broker_configs(client)[RELOGIN][0] != str(value):
            lost.append(value)
    out, err = other.communicate(timeout=300)  # it goes on after this loop ends
    assert other.returncode == 0, err
    assert (lost, out) == ([], "[]\n")  # each read back its own change, never undone
    shown = broker_configs(client)
    assert shown[THREADS] == (str(rounds * 4), ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert shown[RELOGIN] == (str(60_000 + rounds), ConfigSource.DYNAMIC_BROKER_CONFIG)
    with Log.open(log_dir, read_only=True) as log:
        assert log.broker_configs.current().configs["0"] == {
            THREADS: str(rounds * 4),
            RELOGIN: "60025",
        }
