"""Which of librdkafka's test programs apply to one ``txnlog serve``, read from librdkafka's
own test table (``tests/test.c``, ``struct test tests[]``).

Each entry of that table is one test *variant* (``0045_subscribe_update``,
``0045_subscribe_update_mock``, ...); the test-runner selects variants by their four-digit
*number* (``TESTS=0045``), its flags (``-L`` leaves out ``TEST_F_LOCAL``, ``-K``
``TEST_F_KNOWN_ISSUE``), the broker version (``TEST_KAFKA_VERSION`` against each variant's
``TEST_BRKVER``) and the scenario (``-s``; a variant runs only in the scenarios it names). A
*run* here is one number in one scenario: what one test-runner invocation does.

A variant does not apply to a single plaintext broker when:

- the table flags it ``TEST_F_MANUAL`` (run by hand) or ``TEST_F_KNOWN_ISSUE``;
- it needs no broker: ``TEST_F_LOCAL`` (unit tests, client-only checks) or a ``_mock`` /
  ``_local`` name (librdkafka's built-in mock cluster, e.g. 0139 and 0150, flagged 0);
- its ``TEST_BRKVER`` is above the broker version we claim (the share-group tests, KIP-932);
- its source needs what one txnlog server without Kafka's distribution cannot give:
  ``NEEDS`` below, each reason read from the test's C source.

Pure functions over text: nothing here runs a process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SCENARIO = "default"

_RF3 = (
    "three brokers: creates its topics with replication factor 3, which one broker refuses "
    "(INVALID_REPLICATION_FACTOR, as Kafka's own single broker does)"
)
NEEDS: dict[str, str] = {
    "0045_subscribe_update_topic_remove": (
        "Kafka's Java tools: deletes topics with kafka-topics.sh (KAFKA_PATH)"
    ),
    "0045_subscribe_update_non_exist_and_partchange": (
        "Kafka's Java tools: adds partitions with kafka-topics.sh --alter (KAFKA_PATH)"
    ),
    "0052_msg_timestamps": (
        "Kafka's Java tools: creates its topics with kafka-topics.sh --config "
        "message.timestamp.type (KAFKA_PATH)"
    ),
    "0077_compaction": (
        "Kafka's Java tools: creates a compacted topic with kafka-topics.sh (KAFKA_PATH)"
    ),
    "0092_mixed_msgver": (
        "message format v1: sets message.format.version=0.10.0.0 (MsgVersion 1), which the "
        "server does not keep (it stores record batch v2 only, F-11), as Kafka 4.0 removed it "
        "(the test skips itself against 4.0, and with -P)"
    ),
    "0097_ssl_verify": "SSL: an SSL listener and the SSL_* certificates trivup sets up",
    "0098_consumer_txn": (
        "Kafka's Java tools: half its cases produce with the Java TransactionProducerCli "
        "(KAFKA_PATH); three brokers: its topics have replication factor 3"
    ),
    "0101_fetch_from_follower": "several brokers in racks (fetch from follower, KIP-392)",
    "0103_transactions": _RF3,
    "0107_topic_recreate": _RF3,
    "0111_delay_create_topics": _RF3,
    "0115_producer_auth": "Kafka's Java tools: sets ACLs with kafka-acls.sh (KAFKA_PATH)",
    "0119_consumer_auth": "Kafka's Java tools: sets ACLs with kafka-acls.sh (KAFKA_PATH)",
    "0126_oauthbearer_oidc": "SASL/OAUTHBEARER with an OIDC token endpoint",
    "0135_sasl_credentials": (
        "SASL: sasl.username/sasl.password in test.conf (every sub-test skips without them)"
    ),
    "0142_reauthentication": "SASL (SASL_PLAINTEXT or SASL_SSL) re-authentication, KIP-368",
}
"""Variant name -> what it needs beyond one plaintext broker (read from its source)."""

TABLE_START = "struct test tests[] = {"
TABLE_END = "{NULL}};"
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_ENTRY = re.compile(r"_TEST\(\s*(?P<name>\w+)\s*,(?P<body>(?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")
_BRKVER = re.compile(r"TEST_BRKVER\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_STRING_FIELD = r"\.{field}\s*=\s*((?:\"[^\"]*\"\s*)+)"
_ADMIN_API_VERSION = (0, 10, 2, 0)  # TEST_BRKVER_TOPIC_ADMINAPI (testshared.h)
# TEST_F_KNOWN_ISSUE_WIN32 and _OSX are 0 on Linux (test.h)
_FLAG_NAMES = ("TEST_F_LOCAL", "TEST_F_KNOWN_ISSUE", "TEST_F_MANUAL", "TEST_F_SOCKEM")

Version = tuple[int, int, int, int]


@dataclass(frozen=True)
class Variant:
    """One entry of librdkafka's test table."""

    name: str
    flags: frozenset[str]
    min_version: Version | None
    scenarios: tuple[str, ...]
    extra: str

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]

    def exclusion(self, broker_version: Version, *, include_local: bool = False) -> str | None:
        """Why this variant does not apply to one plaintext ``txnlog serve``, or None."""
        if "TEST_F_MANUAL" in self.flags:
            return "manual test (TEST_F_MANUAL): run by hand only"
        if not include_local and self.is_local:
            return (
                "local: needs no broker (TEST_F_LOCAL, or librdkafka's mock cluster): "
                "judges the client, not the server"
            )
        if "TEST_F_KNOWN_ISSUE" in self.flags:
            return "known issue of librdkafka (TEST_F_KNOWN_ISSUE)" + (
                f": {self.extra}" if self.extra else ""
            )
        if self.min_version is not None and self.min_version > broker_version:
            what = " (share groups, KIP-932)" if "_share_" in self.name else ""
            return f"needs a broker >= {format_version(self.min_version)}{what} (TEST_BRKVER)"
        return NEEDS.get(self.name)

    @property
    def is_local(self) -> bool:
        return "TEST_F_LOCAL" in self.flags or "_mock" in self.name or self.name.endswith("_local")


@dataclass(frozen=True)
class Run:
    """One test-runner invocation: a test number in one scenario, and what it runs."""

    number: str
    scenario: str
    variants: tuple[str, ...]

    @property
    def label(self) -> str:
        return run_label(self.number, self.scenario)


@dataclass(frozen=True)
class Excluded:
    """A test number (in one scenario) that does not apply, with its variants' reasons."""

    number: str
    scenario: str
    reasons: tuple[tuple[str, str], ...]  # (variant name, reason)

    @property
    def label(self) -> str:
        return run_label(self.number, self.scenario)


@dataclass
class Plan:
    runs: list[Run] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)


def run_label(number: str, scenario: str) -> str:
    """``0045``, or ``0107/noautocreate`` for a run outside the default scenario."""
    return number if scenario == DEFAULT_SCENARIO else f"{number}/{scenario}"


def parse_version(text: str) -> Version:
    """``"3.9.0"`` -> (3, 9, 0, 0); the form of ``TEST_KAFKA_VERSION``."""
    parts = [int(part) for part in text.split(".")]
    if not 3 <= len(parts) <= 4:
        raise ValueError(f"expected a version like 3.9.0 or 3.9.0.0, got {text!r}")
    a, b, c, *rest = parts
    return (a, b, c, rest[0] if rest else 0)


def format_version(version: Version) -> str:
    return ".".join(str(part) for part in version)


def read_catalogue(tests_dir: Path) -> list[Variant]:
    """The test table of ``tests_dir/test.c``, in its order."""
    return parse_test_table((tests_dir / "test.c").read_text(encoding="utf-8", errors="replace"))


def parse_test_table(test_c: str) -> list[Variant]:
    start = test_c.index(TABLE_START) + len(TABLE_START)
    table = _COMMENT.sub("", test_c[start : test_c.index(TABLE_END, start)])
    return [_variant(match["name"], match["body"]) for match in _ENTRY.finditer(table)]


def _variant(name: str, body: str) -> Variant:
    flags_text = body.split(",", 1)[0]
    flags = frozenset(token.strip() for token in flags_text.split("|")) & set(_FLAG_NAMES)
    version = _BRKVER.search(body)
    min_version: Version | None = None
    if version:
        a, b, c, d = (int(group) for group in version.groups())
        min_version = (a, b, c, d)
    elif "TEST_BRKVER_TOPIC_ADMINAPI" in body:
        min_version = _ADMIN_API_VERSION
    scenario = _string_field(body, "scenario")
    scenarios = tuple(scenario.split(",")) if scenario else (DEFAULT_SCENARIO,)
    return Variant(name, flags, min_version, scenarios, _string_field(body, "extra"))


def _string_field(body: str, name: str) -> str:
    match = re.search(_STRING_FIELD.format(field=name), body)
    if not match:
        return ""
    return "".join(re.findall(r"\"([^\"]*)\"", match.group(1)))


def plan(
    variants: list[Variant],
    numbers: list[str],
    broker_version: Version,
    *,
    include_local: bool = False,
) -> Plan:
    """The runs for ``numbers`` (in that order) and the numbers that do not apply.

    A variant runs in the default scenario if it names it, else in the first it names (the
    test-runner matches ``-s`` as a substring of the variant's list).
    """
    result = Plan()
    for number in numbers:
        by_scenario: dict[str, list[Variant]] = {}
        for variant in variants:
            if variant.number == number:
                scenario = (
                    DEFAULT_SCENARIO
                    if DEFAULT_SCENARIO in variant.scenarios
                    else variant.scenarios[0]
                )
                by_scenario.setdefault(scenario, []).append(variant)
        for scenario, group in by_scenario.items():
            runnable = tuple(
                variant.name
                for variant in group
                if variant.exclusion(broker_version, include_local=include_local) is None
            )
            if runnable:
                result.runs.append(Run(number, scenario, runnable))
                continue
            reasons = tuple(
                (variant.name, variant.exclusion(broker_version, include_local=include_local) or "")
                for variant in group
            )
            result.excluded.append(Excluded(number, scenario, reasons))
    return result


def select_numbers(spec: str | None, variants: list[Variant]) -> list[str]:
    """``"0001,0030-0045"`` -> the table's numbers in those ranges; None -> every number."""
    known = sorted({variant.number for variant in variants})
    if not spec:
        return known
    wanted: set[str] = set()
    for part in (piece.strip() for piece in spec.split(",")):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not (low.isdigit() and (not high or high.isdigit())):
            raise ValueError(f"expected test numbers like 0001,0030-0045, got {part!r}")
        first, last = int(low), int(high or low)
        wanted.update(number for number in known if first <= int(number) <= last)
    return [number for number in known if number in wanted]
