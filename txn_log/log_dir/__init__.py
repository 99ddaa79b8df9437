"""The log directory (Kafka's ``LogManager`` and its housekeeping threads): topics, their
partitions' logs, the producer id block and the background retention and cleaning."""
