"""``txnlog users`` (kafka-configs --entity-type users): SCRAM users are added, changed and
removed without writing Python; only salted credentials reach the file; a running
``txnlog serve`` applies each change to its next connection, without a restart; two
operators changing the file at once lose nothing (R-12)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.txn_wire.auth_clients import logs_in, write_users
from tests.txn_wire.serve_process import TXNLOG, ServeProcess, start_serve
from tests.txn_wire.wire_clients import WAIT_S
from txn_wire.sasl import SCRAM_SHA_256, SCRAM_SHA_512, load_users
from txn_wire.scram_users import (
    ScramChange,
    ScramConfigError,
    alter_user,
    describe_users,
    parse_add_config,
    parse_delete_config,
)


def txnlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TXNLOG, "users", *args], capture_output=True, text=True, timeout=WAIT_S)


def test_kafka_configs_add_config_form_is_read_and_bad_forms_are_named() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a,b=c]") == [
        ScramChange(SCRAM_SHA_256, "a,b=c", 8192)
    ]
    assert parse_add_config("SCRAM-SHA-256=[password=one],SCRAM-SHA-512=[password=two]") == [
        ScramChange(SCRAM_SHA_256, "one"),
        ScramChange(SCRAM_SHA_512, "two"),
    ]
    for bad, named in (
        ("SCRAM-SHA-1=[password=x]", "cannot read --add-config"),
        ("SCRAM-SHA-256=[iterations=100,password=x]", "iterations '100' out of range"),
        ("SCRAM-SHA-256=[iterations=99999999,password=x]", "4096 to 16384"),
        ("SCRAM-SHA-256=[salt=abc,password=x]", "unknown setting salt"),
        ("SCRAM-SHA-256=[iterations=4096]", "no password"),
        ("SCRAM-SHA-256=[password=a],SCRAM-SHA-256=[password=b]", "mechanism twice"),
        ("", "empty"),
    ):
        with pytest.raises(ScramConfigError, match=named):
            parse_add_config(bad)
    assert parse_delete_config("SCRAM-SHA-512") == [SCRAM_SHA_512]
    with pytest.raises(ScramConfigError, match="SCRAM-SHA-256 and/or SCRAM-SHA-512"):
        parse_delete_config("PLAIN")


def test_only_salted_credentials_are_written_and_a_plain_password_entry_is_converted(
    tmp_path: Path,
) -> None:
    users = write_users(tmp_path / "users.json", {"alice": "alice-secret"})
    alter_user(users, "bob", [ScramChange(SCRAM_SHA_512, "bob-secret", 8192)])
    held = alter_user(users, "alice", delete=[SCRAM_SHA_512])
    text = users.read_text()
    assert "secret" not in text  # neither alice's old plain password nor bob's
    assert held == {SCRAM_SHA_256: 4096}
    assert describe_users(users) == {
        "alice": {SCRAM_SHA_256: 4096},
        "bob": {SCRAM_SHA_512: 8192},
    }
    # alice's remaining credential is still her old password's
    from txn_wire.sasl import SaslSession

    session = SaslSession(load_users(users))
    session.handshake("PLAIN")
    session.authenticate(b"\0alice\0alice-secret")
    assert session.principal == "alice"


def test_a_change_that_cannot_apply_writes_nothing(tmp_path: Path) -> None:
    users = write_users(tmp_path / "users.json", {"alice": "alice-secret"})
    alter_user(users, "alice", [ScramChange(SCRAM_SHA_256, "new")])
    before = users.read_bytes()
    with pytest.raises(ScramConfigError, match="'carol' has no SCRAM-SHA-256 credential"):
        alter_user(users, "carol", delete=[SCRAM_SHA_256])
    with pytest.raises(ScramConfigError, match="both added and deleted"):
        alter_user(users, "alice", [ScramChange(SCRAM_SHA_256, "x")], [SCRAM_SHA_256])
    broken = tmp_path / "broken.json"
    broken.write_text('{"alice": {"pasword": "typo"}}')
    done = txnlog(
        "--users-file", str(broken), "--alter", "--entity-name", "bob",
        "--add-config", "SCRAM-SHA-256=[password=x]",
    )  # fmt: skip
    assert done.returncode == 2
    assert "user 'alice': no credential" in done.stderr
    assert broken.read_text() == '{"alice": {"pasword": "typo"}}'
    assert users.read_bytes() == before


@pytest.fixture
def sasl_server(log_dir: Path, tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    users = write_users(tmp_path / "users.json", {"alice": "alice-secret"})
    served = start_serve(log_dir, "--users-file", str(users))
    try:
        yield served, users
    finally:
        served.stop()


def test_a_running_server_applies_users_added_and_removed_by_the_command(
    sasl_server: tuple[ServeProcess, Path],
) -> None:
    server, users = sasl_server
    assert not logs_in(server.bootstrap, "SCRAM-SHA-512", "bob", "bob-secret")
    added = txnlog(
        "--users-file", str(users), "--alter", "--entity-name", "bob",
        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for user bob.\n"
    assert logs_in(server.bootstrap, "SCRAM-SHA-512", "bob", "bob-secret")
    assert logs_in(server.bootstrap, "SCRAM-SHA-256", "alice", "alice-secret")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        removed = txnlog(
            "--users-file", str(users), "--alter", "--entity-name", "alice",
            "--delete-config", mechanism,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
    assert not logs_in(server.bootstrap, "SCRAM-SHA-256", "alice", "alice-secret")
    assert not logs_in(server.bootstrap, "PLAIN", "alice", "alice-secret")
    described = txnlog("--users-file", str(users), "--describe")
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192\n"
    )
    # a hand edit gone wrong keeps what the server held: bob still in, nobody else let in
    users.write_text("{not json")
    assert logs_in(server.bootstrap, "SCRAM-SHA-512", "bob", "bob-secret")
    assert server.process.poll() is None


ALTER_MANY = """
import sys
from pathlib import Path
from txn_wire.scram_users import ScramChange, alter_user
path, who = Path(sys.argv[1]), sys.argv[2]
for i in range(int(sys.argv[3])):
    alter_user(path, f"{who}-{i}", [ScramChange("SCRAM-SHA-256", f"pw-{i}")])
"""


def test_two_processes_altering_the_file_at_once_lose_no_change(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    count = 15
    workers = [
        subprocess.Popen([sys.executable, "-c", ALTER_MANY, str(users), who, str(count)])
        for who in ("left", "right")
    ]
    for worker in workers:
        assert worker.wait(timeout=WAIT_S * 4) == 0
    names = set(json.loads(users.read_text()))
    assert names == {f"{who}-{i}" for who in ("left", "right") for i in range(count)}
    assert set(describe_users(users)) == names
