"""txnlog's log engine: an embedded, multi-process, Kafka-format transactional log.

The engine never imports pyspark or confluent_kafka (DESIGN §1); pyarrow is imported lazily by
the modules that build Arrow data.
"""

from txn_log.errors import TxnLogError

__all__ = ["TxnLogError"]
