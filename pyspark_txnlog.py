"""The ``txnlog`` Spark data source (DESIGN §1).

Spark's Python data source lookup imports every top-level ``pyspark_*`` module and registers its
``DefaultSource``, so ``spark.readStream.format("txnlog")`` works as soon as the package is
installed; ``spark.dataSource.register(TxnLogDataSource)`` works too. This class only parses
nothing and delegates: options are parsed by the reader and the writer, on the driver.

pyspark is the ``spark`` extra (the engine, the CLI and ``txnlog serve`` need none of it):
without it, importing this module says in one line what to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

SPARK_EXTRA = (
    "the txnlog Spark data source needs pyspark: install txnlog with its spark extra, "
    "pip install '.[spark]' in a clone of txnlog (or pip install 'pyspark>=4.2')"
)

try:
    from pyspark.sql.datasource import DataSource
except ModuleNotFoundError as missing:
    if missing.name != "pyspark":
        raise
    raise ModuleNotFoundError(SPARK_EXTRA, name="pyspark") from None

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )
    from pyspark.sql.types import StructType


class TxnLogDataSource(DataSource):
    """``format("txnlog")``: read a txnlog as Spark's Kafka source would, write to it exactly
    once."""

    @classmethod
    def name(cls) -> str:
        return "txnlog"

    def schema(self) -> StructType | str:
        from txn_source.schema import source_schema

        return source_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from txn_source.reader import TxnLogBatchReader

        return TxnLogBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from txn_source.reader import stream_reader

        return stream_reader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from txn_sink.writer import TxnLogBatchWriter

        return TxnLogBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from txn_sink.writer import TxnLogStreamWriter

        return TxnLogStreamWriter(self.options, schema, overwrite)


DefaultSource = TxnLogDataSource
