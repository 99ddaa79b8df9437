"""The transaction coordinator's pure logic: state machine, metadata steps, state-log records
and the replayed coordinator state (KIP-98 §3 of the checklist, DESIGN §4). No I/O here."""
