"""``FileLock``'s hold count (``count_holds``): whether anyone else changed what the lock guards
since this holder's previous hold, read from the lock file's first 8 bytes through a shared
mapping, so that a writer whose caches nobody else can have made stale skips its catch-up
(``PartitionLog._write_locked``, ``TransactionCoordinator._locked``)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from txn_log.file_lock import FileLock

ROOT = Path(__file__).resolve().parents[2]


def hold(lock: FileLock, *, count: bool = True) -> bool:
    """Take and release ``lock`` once; whether it saw another holder's count."""
    lock.acquire(count=count)
    try:
        return lock.others_held
    finally:
        lock.release()


def test_a_holder_sees_exactly_the_holds_others_counted(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    mine, peer = FileLock(path, count_holds=True), FileLock(path, count_holds=True)
    assert hold(mine)  # a first hold knows nothing
    assert not hold(mine)  # its own holds are not another's
    hold(peer, count=False)  # a hold that changed nothing
    assert not hold(mine)
    hold(peer)  # counted at once
    assert hold(mine)
    assert not hold(mine)
    peer.acquire(count=False)
    peer.note_change()
    peer.note_change()  # once per hold
    peer.release()
    assert hold(mine)
    assert not hold(mine)
    assert struct.unpack("<Q", path.read_bytes())[0] == 9  # every counted hold, and only those


def test_an_uncounted_hold_changes_no_byte_and_a_count_can_be_taken_back(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    lock = FileLock(path, count_holds=True)
    hold(lock, count=False)
    assert path.read_bytes() == b""  # nothing counted yet: not even the count's 8 bytes
    hold(lock)
    assert path.read_bytes() == struct.pack("<Q", 1)
    lock.acquire()
    lock.take_back_count()  # a repair that found nothing
    lock.release()
    assert path.read_bytes() == struct.pack("<Q", 1)
    assert not hold(lock, count=False)  # the count taken back was this lock's own
    peer = FileLock(path, count_holds=True)
    hold(peer)
    assert hold(lock)
    lock.close()
    peer.close()


def test_a_lock_without_count_holds_never_trusts_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    lock = FileLock(path)
    assert hold(lock) and hold(lock)
    lock.acquire()
    lock.note_change()
    lock.release()
    assert path.read_bytes() == b""


def test_a_hold_counted_by_another_process_is_seen(tmp_path: Path) -> None:
    """The count is shared memory of the file (``MAP_SHARED``), not a copy per process."""
    path = tmp_path / "x.lock"
    mine = FileLock(path, count_holds=True)
    hold(mine)
    assert not hold(mine)
    script = (
        "import sys; from pathlib import Path; from txn_log.file_lock import FileLock; "
        "lock = FileLock(Path(sys.argv[1]), count_holds=True); lock.acquire(count=False); "
        "lock.note_change(); lock.release()"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT, check=True, timeout=60)
    assert hold(mine)
    assert not hold(mine)
