"""The exactly-once contract between Spark and a log backend (DESIGN §1, §4-5).

``naming`` (transactional ids, sink ids), ``messages`` (``TaskCommit``, ``LedgerEntry``),
``backend`` (the ``TaskTransaction`` and ``LogBackend`` protocols, and the two kinds of backend:
``AtomicCommitBackend``, ``TaskCommitBackend``), ``batch_commit`` (a sink's executor prepare,
driver commit and abort: ``AtomicBatchCommit`` and ``PerTaskCommit``), ``embedded`` (the
atomic backend on a txnlog directory), ``kafka_backend`` with ``kafka_task``, ``kafka_ledger``
and ``kafka_cluster`` (the per-task backend on a Kafka cluster) and ``spark_checkpoint`` (the
query id and consumed offsets in a Spark checkpoint).
"""
