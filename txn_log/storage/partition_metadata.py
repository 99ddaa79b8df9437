"""``partition.metadata``: which topic a partition directory belongs to (Kafka's topic id).

A topic name can be deleted and created again; the name alone cannot tell a process that the
partition it opened is gone. Kafka (KIP-516) gives every topic a random 16-byte id and writes it
into each partition directory, in this exact text form:

    version: 0
    topic_id: <the id, URL-safe base64 without padding, 22 characters>

The file is written once, durably, when the partition is created, and removed first when the
topic is deleted (under the partition lock, DESIGN §3). A process records the topic id when it
opens the partition and checks it, under the partition lock, before every append and marker: a
file that is gone or holds another id means the directory now belongs to nobody or to a new
topic of the same name, and the write is refused (UnknownTopicIdError, InconsistentTopicIdError),
so that no write is acknowledged into a deleted file.

``IdentityCheck`` makes that check one ``stat`` while the file is the one last read: it holds
that file open (``held_file``), so its inode number cannot be given to a file written after
it, and a name that still stands for the held inode (same size and modification time too)
still holds the id read from it. Only a file that is new under the name, or gone, is read (or
refused) again. The file is never rewritten in place: it is replaced by a rename or deleted.
"""

from __future__ import annotations

import base64
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from txn_log.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    UnknownTopicIdError,
)
from txn_log.storage.durable_file import write_durably
from txn_log.storage.file_io import pread_fully
from txn_log.storage.held_file import HeldFile

FILE_NAME = "partition.metadata"
VERSION = 0


def new_topic_id() -> str:
    """A random topic id in Kafka's printed form (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(frozen=True)
class PartitionIdentity:
    """The topic id a partition directory was stamped with."""

    topic_id: str


def write_partition_metadata(directory: Path, topic_id: str) -> None:
    """Write ``partition.metadata`` durably (temp file, fsync, rename, directory fsync)."""
    text = f"version: {VERSION}\ntopic_id: {topic_id}\n"
    write_durably(directory / FILE_NAME, text.encode())


def read_identity(directory: Path, what: str) -> PartitionIdentity:
    """The identity of ``directory`` now; UnknownTopicIdError if it has none (deleted)."""
    path = directory / FILE_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise UnknownTopicIdError(
            f"{what}: the partition was deleted with its topic (no {path})"
        ) from None
    try:
        return _parse_identity(path, pread_fully(fd, 4096, 0))
    finally:
        os.close(fd)


def _parse_identity(path: Path, data: bytes) -> PartitionIdentity:
    text = data.decode(errors="replace")
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if fields.get("version") != str(VERSION) or not fields.get("topic_id"):
        raise CorruptRecordError(f"{path}: not a version {VERSION} partition.metadata: {text!r}")
    return PartitionIdentity(fields["topic_id"])


def check_identity(directory: Path, expected: PartitionIdentity, what: str) -> None:
    """Raise unless ``directory`` still belongs to the topic ``expected`` was read from.

    Compares the topic id itself (a few system calls): inode numbers are reused at once by a
    file system, so a re-created file can have the deleted one's inode.
    """
    try:
        current = read_identity(directory, what)
    except UnknownTopicIdError:
        raise _deleted(expected, what) from None
    _check_same(expected, current, what)


def _deleted(expected: PartitionIdentity, what: str) -> UnknownTopicIdError:
    return UnknownTopicIdError(
        f"{what}: the topic was deleted (topic id {expected.topic_id}) after this process "
        "opened the partition; nothing was written"
    )


def _check_same(expected: PartitionIdentity, current: PartitionIdentity, what: str) -> None:
    if current.topic_id != expected.topic_id:
        raise InconsistentTopicIdError(
            f"{what}: the topic was deleted and re-created (topic id {expected.topic_id} is "
            f"now {current.topic_id}) after this process opened the partition; nothing was "
            "written"
        )


class IdentityCheck:
    """``check_identity`` of one directory against ``expected``, one ``stat`` while the file is
    the one last read (module docstring). Thread-safe; ``close`` releases the held file (a
    later check reads it again)."""

    def __init__(self, directory: Path, expected: PartitionIdentity) -> None:
        self.expected = expected
        self._file = HeldFile(directory / FILE_NAME)
        self._held = False
        self._lock = threading.Lock()

    def check(self, what: object) -> None:
        """Raise as ``check_identity`` does unless the directory still holds ``expected``;
        ``what`` (the partition) is turned into words only for an error."""
        with self._lock:
            if self._held and not self._file.changed():
                return
            name = str(what)
            self._file.release()
            self._held = False
            version = self._file.open_current()
            if version is None:
                raise _deleted(self.expected, name)
            try:
                _check_same(self.expected, _parse_identity(self._file.path, version.read()), name)
            except BaseException:
                version.close()
                raise
            self._file.keep(version)
            self._held = True

    def close(self) -> None:
        with self._lock:
            self._file.release()
            self._held = False
