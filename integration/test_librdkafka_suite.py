"""The librdkafka suite runner's own logic, on canned text: which test numbers apply, how a
test-runner's output is judged, and that without a built librdkafka it skips with a message.
Runs no librdkafka and no server."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration import librdkafka_suite
from integration.librdkafka_catalogue import (
    Run,
    parse_test_table,
    parse_version,
    plan,
    select_numbers,
)
from integration.librdkafka_report import judge
from integration.librdkafka_run import Context, _cpu_seconds, _serve_flags, _write_test_conf
from txn_wire.acl import load_acls

TABLE = """
struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests, TEST_F_LOCAL, _THRES(.ucpu = 100.0, .scpu = 20.0)),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0),
          .extra = "https://github.com/confluentinc/librdkafka/issues/529"),
    _TEST(0030_offset_commit, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(0045_subscribe_update_mock, TEST_F_LOCAL),
    _TEST(0045_subscribe_update_no_create, 0, .scenario = "noautocreate"),
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0), .scenario = "default,ak23"),
    _TEST(0107_topic_recreate, 0, TEST_BRKVER_TOPIC_ADMINAPI, .scenario = "noautocreate"),
    _TEST(0139_offset_validation_mock, 0),
    _TEST(0171_share_consumer_consume, 0, TEST_BRKVER(4, 2, 0, 0)),
    /* Manual tests */
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
"""

VERSION = parse_version("3.9.0")


def test_the_table_is_read_with_flags_versions_and_scenarios() -> None:
    variants = {variant.name: variant for variant in parse_test_table(TABLE)}
    assert variants["0028_long_topicnames"].flags == {"TEST_F_KNOWN_ISSUE"}
    assert variants["0028_long_topicnames"].extra.endswith("issues/529")
    assert variants["0055_producer_latency"].flags == frozenset()  # _WIN32 is 0 on Linux
    assert variants["0103_transactions"].scenarios == ("default", "ak23")
    assert variants["0107_topic_recreate"].min_version == (0, 10, 2, 0)
    assert variants["0171_share_consumer_consume"].min_version == (4, 2, 0, 0)


def test_only_numbers_for_one_plaintext_broker_run_each_in_its_scenario() -> None:
    variants = parse_test_table(TABLE)
    the_plan = plan(variants, select_numbers(None, variants), VERSION)
    runs = {run.label: run.variants for run in the_plan.runs}
    assert runs == {
        "0030": ("0030_offset_commit",),
        "0045": ("0045_subscribe_update",),
        "0045/noautocreate": ("0045_subscribe_update_no_create",),
        "0055": ("0055_producer_latency",),
    }
    why = {item.label: item.reasons[0][1] for item in the_plan.excluded}
    assert why["0000"].startswith("local")
    assert why["0028"].startswith("known issue")
    assert why["0103"].startswith("three brokers: creates its topics with replication factor 3")
    assert why["0107/noautocreate"] == why["0103"]
    assert why["0139"].startswith("local")  # a mock-cluster test flagged 0
    assert "4.2.0.0 (share groups" in why["0171"]
    assert why["8000"].startswith("manual")


def test_numbers_and_ranges_select_from_the_table() -> None:
    variants = parse_test_table(TABLE)
    assert select_numbers("0030,0100-0110", variants) == ["0030", "0103", "0107"]
    with pytest.raises(ValueError, match="0001,0030-0045"):
        select_numbers("30-x", variants)


PASSED = """\
\x1b[36m[0030_offset_commit          /  1.0s] [ do_x:1: PASS (0.50s) ]
TEST 20261126 (bare, scenario default) SUMMARY
|\x1b[32m <MAIN>                                   |     PASSED |   2.000s \x1b[0m|
|\x1b[32m 0030_offset_commit                       |     PASSED |   1.000s \x1b[0m|
"""

FAILED = """\
\x1b[31m### Test "0030_offset_commit (do_nonexist_commit:497)" failed at 0030-offset_commit.c:479:\
nonexist_offset_commit_cb() at Thu Nov 26 18:20:40 2026: ###
Test assertion failed: expected unknown Topic or partition, not Success
### Test "<MAIN>" failed at test.c:1946:test_wait_exit() at Thu Nov 26 18:20:42 2026: ###
4 thread(s) still active in librdkafka
"""

JAVA = """\
%4|test_run_java(IncrementalRebalanceCli): KAFKA_PATH must be set
### Test "0113_cooperative_rebalance (o_java_interop:2089)" failed at x.cpp:2137:o() at now: ###
Unexpected pid: -1
"""

JAVA_FIRST = """\
### Test "0109_auto_create_topics" failed at test.c:5207:test_kafka_cmd() at now: ###
test_kafka_cmd: KAFKA_PATH must be set
"""

SKIPPED = """\
|\x1b[36m 0098_consumer_txn          |    SKIPPED |   0.001s \x1b[0m| RapidJSON not available
"""


def test_each_server_has_an_empty_acl_file_and_its_anonymous_clients_as_super_users(
    tmp_path: Path,
) -> None:
    """Every request allowed as without ACLs, and an authorizer for 0081's ACL sub-tests."""
    flags = _serve_flags(Run("0081", "default", ("0081_admin",)), tmp_path)
    acl_file = flags[flags.index("--acl-file") + 1]
    assert flags[flags.index("--super-users") + 1] == "User:ANONYMOUS"
    assert "--auto-create-topics" in flags
    assert load_acls(Path(acl_file)).rules == ()
    quiet = _serve_flags(Run("0045", "noautocreate", ("0045_no_create",)), tmp_path)
    assert "--auto-create-topics" not in quiet and "--acl-file" in quiet


def test_a_run_is_judged_from_its_summary_or_its_failure_blocks() -> None:
    passed = judge(PASSED, 0, ("0030_offset_commit",))
    assert (passed.result, passed.subtests_passed) == ("pass", 1)
    failed = judge(FAILED, -6, ("0030_offset_commit",))  # abort(): no summary printed
    assert failed.result == "fail"
    assert failed.first_error.startswith("0030_offset_commit (do_nonexist_commit:497): Test")
    assert judge(JAVA, -6, ("0113_cooperative_rebalance",)).result == "partial"
    assert judge(JAVA_FIRST, -6, ("0109_auto_create_topics",)).result == "partial"
    assert judge(JAVA + FAILED, -6, ("0030_offset_commit",)).result == "partial"
    assert judge(FAILED + JAVA, -6, ("0030_offset_commit",)).result == "fail"
    skipped = judge(SKIPPED, 0, ("0098_consumer_txn",))
    assert (skipped.result, skipped.first_error) == ("skip", "RapidJSON not available")
    killed = judge(FAILED, None, ("0030_offset_commit",))
    assert killed.first_error.startswith("killed at the per-test timeout; first failure: 0030")


def test_without_a_built_librdkafka_it_says_what_it_needs_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LIBRDKAFKA_TESTS", raising=False)
    assert librdkafka_suite.main([]) == 0
    assert capsys.readouterr().out.startswith("skipped: librdkafka's test suite needs")
    (tmp_path / "test.c").write_text(TABLE)
    monkeypatch.setenv("LIBRDKAFKA_TESTS", str(tmp_path))
    assert librdkafka_suite.main([]) == 0
    assert "has no built test-runner" in capsys.readouterr().out


def test_the_test_runner_gets_the_harness_timeout_multiplier_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    """librdkafka's own harness hands its test-runner ``test.timeout.multiplier=2``
    (``LibrdkafkaTestApp.py``); the runner writes the same unless ``--timeout-multiplier``
    says otherwise, and the summary's header names it."""
    for argv, expected in (([], 2.0), (["--timeout-multiplier", "1"], 1.0)):
        args = librdkafka_suite._parser().parse_args(argv)
        context = Context(tmp_path, tmp_path, "3.9.0", 60, args.timeout_multiplier, False)
        conf = _write_test_conf(tmp_path, "127.0.0.1:9092", context)
        assert f"test.timeout.multiplier={expected}" in conf.read_text().splitlines()


def test_a_runs_server_cpu_seconds_are_read_from_proc() -> None:
    """The summary gives each run's server CPU time, to tell the server's work from the
    client's waits: a process that burned CPU shows it, a gone one is unknown (-1)."""
    busy = subprocess.Popen(
        [sys.executable, "-c", "import sys\nx = sum(range(10**8))\nsys.stdin.read()"],
        stdin=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while _cpu_seconds(busy.pid) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _cpu_seconds(busy.pid) >= 0.2
    finally:
        busy.communicate(b"")
    assert _cpu_seconds(busy.pid) == -1.0
