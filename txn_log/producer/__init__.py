"""The producer side (Kafka's ``clients/producer``, aiokafka's ``producer/``): ``Producer``, the
records it accepts, its accumulator of batches and its transaction manager."""
