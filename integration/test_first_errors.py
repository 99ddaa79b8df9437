"""Where a newcomer's mistakes surface (issue 26 item 3), in pyspark 4.3's Python Data Source
API: ``load()`` runs the data source's ``schema()`` on the driver, so the source's options and
path are checked there; ``writeStream...start()`` runs none of a Python sink's code (Spark
builds the writer when it plans the first micro-batch, right after ``start()``, with or
without input), so the sink's options and topic fail the query at its first micro-batch; the
stream-only rules (a stream never ends) are checked when the query starts its source. Each
error reaches the user alone, with the fix in its message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from txn_log.log import Log

pytestmark = pytest.mark.spark


@pytest.fixture
def log(tmp_path: Path) -> str:
    path = tmp_path / "log"
    Log.open(path).create_topic("orders", partitions=1)
    return str(path)


def failure_of(query: Any) -> str:
    """The query's error once it has stopped (it must stop within two minutes)."""
    try:
        stopped = query.awaitTermination(120)
    except Exception as error:  # StreamingQueryException
        return str(error)
    query.stop()
    raise AssertionError(f"the query did not fail (stopped: {stopped})")


def test_a_bad_source_option_fails_load(spark: Any, log: str) -> None:
    reader = spark.readStream.format("txnlog").option("subscribe", "orders")
    with pytest.raises(Exception, match="option 'startingOffsets'") as raised:
        reader.option("startingOffsets", "oldest").load(log)
    assert "UnboundLocalError" not in str(raised.value)


def test_a_stream_only_refusal_fails_the_query_alone(spark: Any, log: str, tmp_path: Path) -> None:
    """``endingOffsets`` is valid for ``spark.read``, so ``load()`` cannot refuse it; the
    stream refuses it when it starts, and the user sees that refusal, not pyspark's
    ``UnboundLocalError`` from its runner's ``finally``."""
    stream = (
        spark.readStream.format("txnlog")
        .option("subscribe", "orders")
        .option("endingOffsets", "latest")
        .load(log)
    )
    query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
    error = failure_of(query.start())
    assert "option 'endingOffsets' is not valid in streaming queries" in error
    assert "UnboundLocalError" not in error


def test_a_missing_sink_topic_fails_the_first_micro_batch(
    spark: Any, log: str, tmp_path: Path
) -> None:
    """No input arrives: the first micro-batch, which Spark plans at once, still builds the
    writer, which refuses the missing topic and says how to create it."""
    stream = spark.readStream.format("txnlog").option("subscribe", "orders").load(log)
    query = (
        stream.writeStream.format("txnlog")
        .option("topic", "orders_clean")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start(log)
    )
    error = failure_of(query)
    assert "topic 'orders_clean' does not exist" in error
    assert f"txnlog topics create {log} orders_clean" in error
