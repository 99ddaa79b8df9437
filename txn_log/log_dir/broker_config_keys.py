"""The dynamic broker configs a log takes (``broker_config``): a few of Kafka's dynamically
updatable broker keys, each with Kafka's type, range and default, where Kafka allows it to be
set (per broker, or also as the cluster-wide default), and what it does here.

    key                                     type and default  where       here
    log.cleanup.policy                      LIST of delete,   both        the cleanup.policy
                                            compact: delete               of topics without one
    background.threads                      INT >= 1: 10      both        nothing: no pool
    sasl.kerberos.min.time.before.relogin   LONG: 60000       per broker  nothing: no GSSAPI

A configured feature must run: ``log.cleanup.policy`` is applied (every process of the log
takes it as the cleanup.policy of each topic that does not set its own, at its next operation
on the topic, as Kafka's brokers take it; the internal topics keep theirs, compact). The other
two tune what txnlog does not have, and say so (their ``documentation``, which DescribeConfigs
reports): a Kafka broker accepts them too where they have nothing to tune (a broker without a
GSSAPI listener never logs in with Kerberos), and 0081, librdkafka's admin test, sets them.
Every other key is refused, naming it. Pure; thread-safe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from txn_log.errors import InvalidConfigError
from txn_log.topic_config import CLEANUP_POLICIES, parse_cleanup_policy, shown_value

INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


class KeyType(enum.Enum):
    """Kafka's ``ConfigDef.Type`` of a key, with its DescribeConfigs ``config_type`` id."""

    INT = 3
    LONG = 5
    LIST = 7


@dataclass(frozen=True)
class BrokerKey:
    """One dynamic broker config: Kafka's definition and what it does here."""

    name: str
    type: KeyType
    default: str
    documentation: str
    minimum: int | None = None
    per_broker: bool = False  # Kafka's PerBrokerConfigs: never the cluster-wide default
    topic_key: str | None = None  # the topic config it is the default of (Kafka's synonym)

    @property
    def is_list(self) -> bool:
        return self.type is KeyType.LIST

    def parse(self, raw: str) -> str:
        """``raw`` as stored (normalised text); InvalidConfigError in Kafka's words, naming
        the key, when it is not a valid value."""
        if self.type is KeyType.LIST:
            try:
                return parse_cleanup_policy(raw)
            except InvalidConfigError:
                choices = ", ".join(CLEANUP_POLICIES)
                raise _invalid(raw, self.name, f"String must be one of: {choices}") from None
        low, high = INT_RANGE if self.type is KeyType.INT else LONG_RANGE
        try:
            value = int(raw.strip())
        except ValueError:
            raise _invalid(raw, self.name, f"Not a number of type {self.type.name}") from None
        if not low <= value <= high:
            raise _invalid(raw, self.name, f"Not a number of type {self.type.name}")
        if self.minimum is not None and value < self.minimum:
            raise _invalid(raw, self.name, f"Value must be at least {self.minimum}")
        return str(value)


def _invalid(raw: str, name: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {shown_value(raw)} for configuration {name}: {why}")


KEYS: dict[str, BrokerKey] = {
    key.name: key
    for key in (
        BrokerKey(
            "log.cleanup.policy",
            KeyType.LIST,
            "delete",
            "The default cleanup.policy of the topics that do not set their own: every process "
            "of the log applies it to them at its next operation on the topic (retention for "
            "delete, the cleaner and the key rule for compact). The internal topics stay "
            "compact.",
            topic_key="cleanup.policy",
        ),
        BrokerKey(
            "background.threads",
            KeyType.INT,
            "10",
            "Accepted and kept as Kafka's dynamic broker config, and not applied: txnlog has no "
            "background thread pool to size. Its background work (retention, producer-id "
            "expiration, the cleaner, the flush.ms check) runs in one housekeeping thread per "
            "process, one pass at a time across the processes of a log.",
            minimum=1,
        ),
        BrokerKey(
            "sasl.kerberos.min.time.before.relogin",
            KeyType.LONG,
            "60000",
            "Accepted and kept as Kafka's dynamic broker config, and not applied: txnlog serve "
            "offers no GSSAPI (Kerberos) SASL mechanism (PLAIN and SCRAM only), so there is no "
            "Kerberos login to renew, as on a Kafka broker without a GSSAPI listener.",
            per_broker=True,
        ),
    )
}
"""The dynamic broker configs this log takes, by name."""
