"""The wire tests' ``txnlog serve`` process: ``demo.served`` (shared with the Kafka-mode demo)."""

from demo.served import TXNLOG, ServeProcess, start_serve

__all__ = ["TXNLOG", "ServeProcess", "start_serve"]
