"""Kafka's record batch v2 (magic 2): header, records, control records, compression."""
