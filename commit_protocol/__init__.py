"""The exactly-once contract between Spark and a log backend (DESIGN §1, §4-5).

``naming`` (transactional ids, sink ids), ``messages`` (``TaskCommit``), ``backend`` (the
``LogBackend`` / ``TaskTransaction`` protocols), ``embedded`` (the backend on a txnlog
directory), ``batch_commit`` (executor prepare, driver commit and abort) and
``spark_checkpoint`` (the query id and consumed offsets in a Spark checkpoint).
"""
