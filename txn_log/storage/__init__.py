"""On-disk storage of one partition: segments, indexes, producer state, the partition log."""
