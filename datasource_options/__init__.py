"""See DESIGN.md §1: what the txnlog source and sink share about their options."""
