"""Consumer groups (Kafka's ``coordinator/group``): the committed offsets of
``__consumer_offsets``, their in-memory metadata and the members the wire's groups keep."""
