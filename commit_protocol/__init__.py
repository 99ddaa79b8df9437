"""See DESIGN.md §1: the commit_protocol layer."""
