"""File descriptors that close with their owner.

The engine keeps raw OS descriptors (``os.pread``/``os.pwrite`` on segments, ``flock`` on lock
files). ``close()`` releases them; ``owned_fd`` also closes one when its owner is garbage
collected without ``close()``, as ``io.FileIO`` does, so a forgotten ``Log`` does not leak
descriptors for the life of the process. Leaked descriptors are not harmless: py4j's callback
server waits on ``select()``, which cannot watch a descriptor numbered 1024 or more, so a
Python Spark driver that has leaked about a thousand of them hangs in its first
``foreachBatch``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable


def owned_fd(owner: object, fd: int) -> Callable[[], object]:
    """Tie ``fd`` to ``owner``: calling the result closes ``fd`` now (once; later calls do
    nothing), and it is closed anyway when ``owner`` is garbage collected."""
    return weakref.finalize(owner, os.close, fd)
