"""``txn_wire``: the Kafka wire protocol over a txnlog directory (``txnlog serve``).

Unmodified Kafka clients (librdkafka through confluent-kafka, kafka-python, ...) produce,
consume and run transactions against a log directory that other processes keep using
directly: the server is one more peer of the directory (DESIGN §3).

Layers, lowest first: ``codec`` (frames and kio's per-version classes, behind a
version-neutral layer of plain data), ``broker`` (the open log, settings, error codes), the
handlers (``metadata``, ``produce``, ``fetch``, ``list_offsets``, ``transactions``), the
in-memory ``group_coordinator`` (classic rebalances), and
``server`` (asyncio: one request at a time per connection, engine calls on worker threads).
It imports ``txn_log`` and ``kio`` only; the engine never imports it (the ``txnlog serve``
command does, lazily).
"""
