"""Kafka's dynamic broker configs for one log directory (AlterConfigs and
IncrementalAlterConfigs of a BROKER resource, ``txnlog configs --entity-type brokers``), kept
where every process of the log reads them (DESIGN §3):

    <log dir>/broker-config.json        {"format_version": 1,
                                         "configs": {"": {key: value, ...},
                                                     "0": {key: value, ...}}}
    <log dir>/broker-config.json.lock   the editor lock

``""`` is the cluster-wide default (Kafka's ``<default>`` entity) and ``"0"`` broker 0, which
every ``txnlog serve`` of the log is; values are Kafka's text, normalised. A missing file is
no dynamic config. The keys are ``broker_config_keys.KEYS``, each with what it does here.

A key's value is broker 0's if set, else the cluster default's, else Kafka's static default,
as Kafka resolves it (sources DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
DEFAULT_CONFIG). ``log.cleanup.policy`` so resolved is the ``cleanup.policy`` of every topic
that does not set its own, internal topics aside (``topic_defaults``): each process's topic
config watch applies it at its next operation on the topic (``topic_config_watch``).

A change (``BrokerConfigStore.alter``, ``Log.broker_configs``) is validated first: an unknown
key or one Kafka does not let change dynamically, a per-broker key at the cluster default, a bad
value, APPEND or SUBTRACT of a key that is no list, a key twice or a null value raise
InvalidConfigError naming the key, and nothing is written (STYLE 3). Then, under the editor lock
(an flock that every editor holds for its read-modify-write), the file is read afresh, changed
and replaced whole (``durable_file``), so two processes' changes never undo each other. Replace
(AlterConfigs) sets the resource's keys to those given, removing the others; incremental
(IncrementalAlterConfigs) changes the keys named: SET, DELETE (back to the next source), and
APPEND / SUBTRACT for a list (from the resource's value, else the static default, as Kafka).

Readers stat the file once per look (``storage.held_file``) and parse it again only when it
was replaced. Thread-safe: a lock per store around its held file.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from txn_log.errors import ConfigError, InvalidConfigError
from txn_log.file_lock import FileLock
from txn_log.log_dir.alter_configs import AlterConfigOp, OpType, list_change
from txn_log.log_dir.broker_config_keys import KEYS
from txn_log.storage.durable_file import write_durably
from txn_log.storage.held_file import HeldFile
from txn_log.topic_config import INTERNAL_TOPICS, shown_value

FILE_NAME = "broker-config.json"
FORMAT_VERSION = 1
CLUSTER_DEFAULT = ""
"""The resource name of the cluster-wide default (Kafka's ``<default>`` broker entity)."""
THIS_BROKER = "0"
"""The resource name of the one broker every ``txnlog serve`` of a log is."""
RESOURCES = (CLUSTER_DEFAULT, THIS_BROKER)

DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"


@dataclass(frozen=True)
class BrokerConfig:
    """The dynamic broker configs as one version of the file holds them."""

    configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    """Resource name ("" or "0") → key → value, the resources with a value only."""

    def value(self, key: str) -> tuple[str, str]:
        """(value, source) of ``key`` (one of ``KEYS``), resolved as Kafka resolves it."""
        for resource, source in (
            (THIS_BROKER, DYNAMIC_BROKER_CONFIG),
            (CLUSTER_DEFAULT, DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            found = self.configs.get(resource, {}).get(key)
            if found is not None:
                return found, source
        return KEYS[key].default, DEFAULT_CONFIG

    def topic_defaults(self, topic: str) -> dict[str, tuple[str, str]]:
        """Topic config key → (value, source) for the keys a dynamic broker config gives
        ``topic`` when it does not set its own; none for an internal topic."""
        if topic in INTERNAL_TOPICS:
            return {}
        found = {}
        for key in KEYS.values():
            if key.topic_key is not None:
                value, source = self.value(key.name)
                if source != DEFAULT_CONFIG:
                    found[key.topic_key] = (value, source)
        return found

    def document(self) -> dict[str, object]:
        return {
            "format_version": FORMAT_VERSION,
            "configs": {name: dict(sorted(keys.items())) for name, keys in self.configs.items()},
        }


def topic_key_sources(
    topic: str, overrides: frozenset[str], broker: BrokerConfig
) -> Callable[[str], str]:
    """Where each key of ``topic``'s config comes from, as Kafka's DescribeConfigs names it:
    DYNAMIC_TOPIC_CONFIG for the keys the topic sets (``overrides``), the source of a dynamic
    broker default for those it takes from one, else DEFAULT_CONFIG."""
    defaults = broker.topic_defaults(topic)

    def source(key: str) -> str:
        if key in overrides:
            return DYNAMIC_TOPIC_CONFIG
        return defaults[key][1] if key in defaults else DEFAULT_CONFIG

    return source


def parse_document(data: bytes, where: Path) -> BrokerConfig:
    """The configs in one version of the file; ConfigError naming the file if it is not one
    this build wrote (it is only ever replaced whole, validated: delete or restore it)."""
    try:
        document = json.loads(data)
        if document.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {document.get('format_version')!r}")
        configs = {
            resource: {key: KEYS[key].parse(str(value)) for key, value in keys.items()}
            for resource, keys in document["configs"].items()
            if resource in RESOURCES
        }
    except (ValueError, KeyError, TypeError, AttributeError, InvalidConfigError) as problem:
        raise ConfigError(
            f"{where}: not a broker config file of format version {FORMAT_VERSION} "
            f"({problem!r}); restore it or delete it (no dynamic broker configs)"
        ) from None
    return BrokerConfig(MappingProxyType({k: MappingProxyType(v) for k, v in configs.items()}))


def altered(
    current: BrokerConfig, resource: str, ops: Sequence[AlterConfigOp], *, replace: bool
) -> BrokerConfig:
    """``current`` after ``ops`` on ``resource`` ("" or "0"); InvalidConfigError naming the
    key, in Kafka's words, with nothing changed, if any of them is refused."""
    if resource not in RESOURCES:
        raise InvalidConfigError(
            f"broker resource {shown_value(resource)}: only the cluster default ('') and "
            f"broker {THIS_BROKER} have configs here"
        )
    _check(resource, ops, replace=replace)
    values = {} if replace else dict(current.configs.get(resource, {}))
    for op in ops:
        key = KEYS[op.key]
        if op.op_type is OpType.DELETE:
            values.pop(op.key, None)
        elif op.op_type is OpType.SET:
            values[op.key] = key.parse(str(op.value))
        else:
            base = values.get(op.key, key.default)
            values[op.key] = key.parse(list_change(op, base))
    configs = {name: dict(keys) for name, keys in current.configs.items()}
    configs[resource] = values
    kept = {name: MappingProxyType(keys) for name, keys in configs.items() if keys}
    return BrokerConfig(MappingProxyType(kept))


def _check(resource: str, ops: Sequence[AlterConfigOp], *, replace: bool) -> None:
    """What Kafka's broker refuses before it looks at a value (``DynamicBrokerConfig.
    validateConfigs`` and ``ConfigAdminManager.prepareIncrementalConfigs``)."""
    names = [op.key for op in ops]
    twice = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if twice:
        raise InvalidConfigError(f"Error due to duplicate config keys: {_shown(twice)}")
    unknown = [name for name in names if name not in KEYS]
    if unknown:
        raise InvalidConfigError(
            f"Cannot update these configs dynamically: {_shown(unknown)} (the dynamic broker "
            f"configs of a txnlog log are {', '.join(sorted(KEYS))}; the others are txnlog "
            "serve's command line)"
        )
    nulls = [op.key for op in ops if op.value is None and op.op_type is not OpType.DELETE]
    if nulls:
        raise InvalidConfigError(f"Null value not supported for : {_shown(nulls)}")
    for op in ops:
        if replace and op.op_type is not OpType.SET:
            raise InvalidConfigError(
                f"a replacing alteration only sets keys; {op.op_type.name} of {op.key} is not one"
            )
        if op.op_type in (OpType.APPEND, OpType.SUBTRACT) and not KEYS[op.key].is_list:
            verb = "append" if op.op_type is OpType.APPEND else "subtract"
            raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {op.key}")
    if resource == CLUSTER_DEFAULT:
        per_broker = [name for name in names if KEYS[name].per_broker]
        if per_broker:
            raise InvalidConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_shown(per_broker)}"
            )


def _shown(names: Sequence[str]) -> str:
    listed = ", ".join(shown_value(name) for name in names[:10])
    return listed + (f" and {len(names) - 10} more" if len(names) > 10 else "")


class BrokerConfigStore:
    """The broker config file of the log at ``log_path``: read (``current``) by every process,
    changed (``alter``) one editor at a time."""

    def __init__(self, log_path: Path, *, read_only: bool = False) -> None:
        self.path = Path(log_path) / FILE_NAME
        self.read_only = read_only
        self._mutex = threading.Lock()
        self._file = HeldFile(self.path)  # the version last parsed, held open
        self._config: BrokerConfig | None = None
        self._editor_lock = FileLock(self.path.with_name(FILE_NAME + ".lock"))

    def current(self) -> BrokerConfig:
        """The configs as the file holds them now (one ``stat`` when it is unchanged)."""
        with self._mutex:
            if self._config is not None and not self._file.changed():
                return self._config
            version = self._file.open_current()
            if version is None:
                self._file.release()
                self._config = BrokerConfig()
                return self._config
            try:
                config = parse_document(version.read(), self.path)
            except BaseException:
                version.close()
                raise
            self._file.keep(version)
            self._config = config
            return config

    def alter(
        self,
        resource: str,
        ops: Sequence[AlterConfigOp],
        *,
        replace: bool = False,
        validate_only: bool = False,
    ) -> BrokerConfig:
        """Change ``resource``'s configs (see the module docstring) and return the result;
        ``validate_only`` checks against the file as it is and writes nothing. ConfigError on
        a log opened read-only. Every process applies the change at its next operation on a
        topic it concerns (``topic_config_watch``)."""
        if self.read_only:
            raise ConfigError(
                f"cannot alter the broker configs of {self.path.parent}: the log was opened "
                "read-only"
            )
        if validate_only:
            return altered(self.current(), resource, ops, replace=replace)
        with self._editor_lock:
            changed = altered(self.current(), resource, ops, replace=replace)
            data = json.dumps(changed.document(), sort_keys=True, indent=1).encode()
            write_durably(self.path, data)
        return changed

    def close(self) -> None:
        """Close the held file and the editor lock's descriptor (the store can still be
        used: it opens them again)."""
        with self._mutex:
            self._file.release()
            self._config = None
        self._editor_lock.close()
