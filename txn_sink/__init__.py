"""The Spark writer of ``format("txnlog")`` (DESIGN §1, §5).

``writer`` (the thin Spark classes ``TxnLogStreamWriter`` / ``TxnLogBatchWriter`` and their
commit message), ``options`` (``SinkOptions``), ``input_schema`` (the accepted input columns),
``task_writer`` (executor side: routing, bounded buffering, writing in the task's transaction),
``key_partitioner`` (Kafka's murmur2 partitioner over Arrow key columns) and ``topics``.
"""
