"""See DESIGN.md §1: the txn_source layer."""
