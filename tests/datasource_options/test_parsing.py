"""The options the txnlog source and sink share are parsed by one module (issue 13 item 5):
the same ``path`` names the same log directory for a reader and a writer, and both refuse an
unknown option the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from txn_log.errors import ConfigError
from txn_sink.options import SinkOptions
from txn_source.options import parse_source_options


def source_path(path: str) -> str:
    return parse_source_options({"path": path, "subscribe": "t"}).path


def sink_path(path: str) -> str:
    return SinkOptions.parse({"path": path}).path


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/data/log", "/data/log"),
        ("  /data/log  ", "/data/log"),
        ("/data/./log/", "/data/log"),
        ("data/log", "{cwd}/data/log"),
        ("./log", "{cwd}/log"),
        ("~/log", "{home}/log"),
        ("file:/data/log", "/data/log"),
        ("file:///data/log", "/data/log"),
        ("FILE:///data/log", "/data/log"),
        ("file://localhost/data/log", "/data/log"),
        ("file:data/log", "{cwd}/data/log"),
        ("./with:colon", "{cwd}/with:colon"),
    ],
)
def test_source_and_sink_resolve_a_path_to_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, expected: str
) -> None:
    """A plain path (absolute, relative to the driver's working directory, or ``~``) and a
    ``file:`` URI name the same directory, made absolute on the driver so that executors
    with another working directory read and write the same log."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    want = expected.format(cwd=tmp_path.resolve(), home=(tmp_path / "home").resolve())
    assert source_path(given) == sink_path(given) == want


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("hdfs://namenode/data/log", "scheme 'hdfs'"),
        ("s3a://bucket/log", "scheme 's3a'"),
        ("hdfs:/data/log", "scheme 'hdfs'"),
        ("file://otherhost/data/log", "host 'otherhost'"),
        ("file://", "no directory"),
    ],
)
def test_source_and_sink_refuse_a_path_that_is_not_local_alike(given: str, why: str) -> None:
    messages = []
    for parse in (source_path, sink_path):
        with pytest.raises(ConfigError) as refused:
            parse(given)
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    message = messages[0]
    assert message.startswith("option 'path' must be a local directory"), message
    assert why in message and repr(given) in message
    assert "/data/log" in message and "file:///data/log" in message  # what would be valid


@pytest.mark.parametrize("given", ["", "   "])
def test_both_require_a_path(given: str) -> None:
    for parse in (source_path, sink_path):
        with pytest.raises(ConfigError, match="option 'path' is required"):
            parse(given)


def test_both_refuse_unknown_options_naming_every_valid_one() -> None:
    """Keys are case-insensitive in both (Spark lowercases them); a typo is refused, never
    silently read as "use the default"."""
    with pytest.raises(ConfigError) as source:
        parse_source_options({"path": "/l", "subscribe": "t", "startingOffset": "earliest"})
    with pytest.raises(ConfigError) as sink:
        SinkOptions.parse({"path": "/l", "Topik": "t"})
    for error, role, name, valid in (
        (source, "source", "startingOffset", "startingOffsets"),
        (sink, "sink", "Topik", "topic"),
    ):
        message = str(error.value)
        assert message.startswith(f"unknown option {name!r} for the txnlog {role}"), message
        assert valid in message and message.endswith("(case-insensitive)")
