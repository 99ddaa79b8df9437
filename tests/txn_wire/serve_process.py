"""The wire tests' ``txnlog serve`` process: ``demo.served`` (shared with the Kafka-mode demo),
and ``serving`` for fixtures."""

from collections.abc import Iterator
from pathlib import Path

from demo.served import TXNLOG, ServeProcess, start_serve

__all__ = ["TXNLOG", "ServeProcess", "serving", "start_serve"]


def serving(log_dir: Path, *options: str) -> Iterator[ServeProcess]:
    """``txnlog serve log_dir *options`` for a fixture to yield from: stopped by its pid after."""
    served = start_serve(log_dir, *options)
    try:
        yield served
    finally:
        served.stop()
