"""Where a txnlog source or sink reads and writes: a log directory, or a Kafka cluster.

Exactly one of the two is given:

    path                        a txnlog directory on this machine (``parsing.resolve_log_path``)
    kafka.bootstrap.servers     ``host:port[,host:port...]`` of any Kafka cluster (Apache Kafka,
                                Confluent, Redpanda, ``txnlog serve``): the Kafka backend

As in Spark's Kafka connector, every other ``kafka.<name>`` option is handed to the Kafka client
(librdkafka, through confluent-kafka) as ``<name>``: security settings, timeouts, client id.
Options the connector itself decides (deserializers, the transactional id, auto commit, ...) are
refused by the caller's ``refused`` table, each with the option to use instead; librdkafka
checks the names and values of the rest when a client is built from them.

Pure functions, safe from any thread; imports nothing from Kafka (the layering: the caller's
backend builds the clients).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from datasource_options.parsing import resolve_log_path
from txn_log.errors import ConfigError

KAFKA_PREFIX = "kafka."
BOOTSTRAP = "kafka.bootstrap.servers"
KAFKA_EXTRA = (
    "Kafka mode (option 'kafka.bootstrap.servers') needs confluent-kafka: install txnlog "
    "with its kafka extra, pip install '.[kafka]' in a clone of txnlog (or pip install "
    "'confluent-kafka>=2.3')"
)


CLIENT_DEFAULTS: tuple[tuple[str, str], ...] = (("reconnect.backoff.ms", "10"),)
"""Settings of every client the connector builds, unless the user gives their own.

``reconnect.backoff.ms``: librdkafka (since 2.10) drops the bootstrap brokers as soon as the
cluster's metadata names its brokers, and a request still in flight on the bootstrap
connection is lost; the client asks again on the broker's own connection only after its
sparse-connection pause, half this setting (at least 11 ms): 50 ms at the default 100 ms, paid
by every new client on its first request (each write task's transactional producer, each
AdminClient). At 10 ms, a transactional producer's metadata and ``init_transactions`` took a
median 19 ms instead of 58 ms against ``txnlog serve`` (40 each; the default also had 500 ms
outliers, a lost coordinator lookup retried), an AdminClient's first ``list_topics`` 15 ms
instead of 54 ms. The cost is in an outage: a producer or AdminClient backs off exponentially
up to ``reconnect.backoff.max.ms`` (10 attempts in 8 s against a closed port, either setting),
but a consumer with a ``group.id`` (confluent-kafka requires one; the source's consumers never
join their group) keeps looking for its coordinator, one connection attempt per
sparse-connection pause: about 70 a second at 10 ms against 20 at 100 ms (measured against a
closed port, librdkafka 2.16). Kept clients end when unused (``commit_protocol.client_cache``);
a user who prefers fewer attempts during an outage sets ``kafka.reconnect.backoff.ms``."""


@dataclass(frozen=True)
class KafkaCluster:
    """A Kafka cluster and the client settings the user gave for it (picklable).

    ``settings`` are the ``kafka.*`` options without their prefix, ``bootstrap.servers``
    included, sorted by name.
    """

    bootstrap_servers: str
    settings: tuple[tuple[str, str], ...]

    @classmethod
    def at(cls, bootstrap_servers: str) -> KafkaCluster:
        """The cluster at ``bootstrap_servers`` with no other client setting."""
        return cls(bootstrap_servers, (("bootstrap.servers", bootstrap_servers),))

    def client_config(self, **overrides: str | int | bool) -> dict[str, str | int | bool]:
        """A confluent-kafka config: ``CLIENT_DEFAULTS``, then the user's settings, then the
        connector's ``overrides`` (names spelled with ``_`` for ``.``:
        ``isolation_level="read_committed"``)."""
        config: dict[str, str | int | bool] = dict(CLIENT_DEFAULTS)
        config.update(self.settings)
        config.update({name.replace("_", "."): value for name, value in overrides.items()})
        return config

    def describe(self) -> str:
        return f"Kafka cluster {self.bootstrap_servers}"


Location = str | KafkaCluster
"""An absolute log directory, or a Kafka cluster."""


def kafka_options(given: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options of ``given`` (names lower-cased, as librdkafka spells them)."""
    return {k.lower(): v for k, v in given.items() if k.lower().startswith(KAFKA_PREFIX)}


def parse_location(
    given: Mapping[str, str],
    *,
    usage: str,
    refused: Mapping[str, str] = {},
    also_for_path: Collection[str] = (),
) -> Location:
    """The log directory of option ``path`` or the cluster of ``kafka.bootstrap.servers``.

    ``refused`` maps a ``kafka.*`` option the caller decides itself to what to use instead;
    ``also_for_path`` names the ``kafka.*`` options that mean something for a log directory
    too (the source's ``kafka.isolation.level``). Raises ConfigError when both or neither are
    given, when the bootstrap list is malformed, when a refused option is set, when a
    ``kafka.*`` option is set for a log directory, where no Kafka client would read it, or
    when confluent-kafka (the ``kafka`` extra) is not installed.
    """
    kafka = kafka_options(given)
    path = given.get("path")
    has_path = path is not None and str(path).strip() != ""
    if BOOTSTRAP not in kafka:
        ignored = sorted(set(kafka) - {name.lower() for name in also_for_path})
        if ignored:
            raise ConfigError(
                f"option{'s' if len(ignored) > 1 else ''} {', '.join(map(repr, ignored))} "
                f"configure a Kafka client, which a txnlog directory does not use; set "
                f"{BOOTSTRAP!r} (instead of 'path') to use a Kafka cluster, or remove them"
            )
        return resolve_log_path(path, usage=usage)
    if has_path:
        raise ConfigError(
            f"options 'path' ({path!r}) and {BOOTSTRAP!r} ({kafka[BOOTSTRAP]!r}) are both set; "
            "give exactly one: a txnlog directory, or a Kafka cluster"
        )
    for name in sorted(kafka):
        if name in refused:
            raise ConfigError(f"option {name!r} is not supported: {refused[name]}")
    if importlib.util.find_spec("confluent_kafka") is None:
        raise ConfigError(KAFKA_EXTRA)  # here, on the driver, not in a task's traceback
    return KafkaCluster(
        _bootstrap(kafka[BOOTSTRAP]),
        tuple(
            sorted((name[len(KAFKA_PREFIX) :], str(value).strip()) for name, value in kafka.items())
        ),
    )


def _bootstrap(raw: str) -> str:
    servers = [s.strip() for s in str(raw).split(",")]
    for server in servers:
        host, colon, port = server.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"option {BOOTSTRAP!r} must be a comma-separated list of host:port, got "
                f"{raw!r} ({server!r} is not host:port with a port from 1 to 65535)"
            )
    return ",".join(servers)
