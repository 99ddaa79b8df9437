"""The APIs and versions ``txnlog serve`` speaks, and the ApiVersions answer (KAFKA-WIRE §A).

Ranges are those real clients need (librdkafka's minimums: Produce 3, Fetch 4, ListOffsets 2,
FindCoordinator 1, AddPartitionsToTxn/AddOffsetsToTxn 0) and stop below the versions that
switch to topic ids (Fetch 13, Produce 10, Metadata 13) or batch several coordinator requests
in one (AddPartitionsToTxn 4), which this server does not implement. InitProducerId goes to v4
because librdkafka needs v3+ to recover from abortable errors by an epoch bump (KIP-360).
DeleteTopics goes to v6, whose topic ids the handler resolves (``admin_topics``); it starts at
v1, as in Kafka 4 and kio (librdkafka sends up to v4, CreatePartitions up to v2).
DescribeAcls, CreateAcls and DeleteAcls start at v1 too: Kafka 4 removed their v0 (KIP-896),
which kio does not have either; v1 adds the resource pattern type (PREFIXED), v2 is flexible
(librdkafka sends v1).

SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2 are served, and advertised, only on a
SASL_PLAINTEXT listener (``SASL``, ``listeners``): a PLAINTEXT one does not offer what it
cannot do. The SCRAM credential APIs (50, 51) are served on every listener: Kafka's credential
store exists whatever the listeners are.

A request for a version outside its range is refused; for ApiVersions itself the answer is
Kafka's: error UNSUPPORTED_VERSION (35) in a v0-shaped response listing the supported ranges,
whatever version was asked (Kafka's ``RequestContext``), so that a client can fall back.
"""

from __future__ import annotations

from typing import Any

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35

SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets (v7: -3, the newest timestamp, KIP-734)
    3: (1, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch
    10: (0, 4),  # FindCoordinator
    11: (0, 5),  # JoinGroup
    12: (0, 3),  # Heartbeat
    13: (0, 3),  # LeaveGroup
    14: (0, 3),  # SyncGroup
    15: (0, 4),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 3),  # ApiVersions
    19: (0, 5),  # CreateTopics
    20: (1, 6),  # DeleteTopics (v0 is gone from Kafka 4 and kio; v6 names topics by id too)
    21: (0, 2),  # DeleteRecords
    22: (0, 4),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn
    25: (0, 3),  # AddOffsetsToTxn
    26: (0, 3),  # EndTxn
    28: (0, 3),  # TxnOffsetCommit
    29: (1, 3),  # DescribeAcls (v0 is gone from Kafka 4 and kio)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete (Kafka has v0 only)
    50: (0, 0),  # DescribeUserScramCredentials (KIP-554; on every listener, as in Kafka)
    51: (0, 0),  # AlterUserScramCredentials
}
"""api key → (min version, max version), inclusive."""

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
"""The SASL APIs, served on a SASL_PLAINTEXT listener only."""


def _ranges(sasl: bool) -> dict[int, tuple[int, int]]:
    return {**SUPPORTED, **SASL} if sasl else SUPPORTED


def is_supported(api_key: int, api_version: int, *, sasl: bool = False) -> bool:
    versions = _ranges(sasl).get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def api_versions_body(error_code: int = 0, *, sasl: bool = False) -> dict[str, Any]:
    """The ApiVersions response body: every supported range (all versions share this)."""
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(_ranges(sasl).items())
        ],
    }
