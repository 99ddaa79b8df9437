"""The consumer side (Kafka's ``clients/consumer``, aiokafka's ``consumer/``): ``Consumer`` and
read_committed, which hides aborted transactions' records below the last stable offset."""
