"""See DESIGN.md §1: the offsets layer."""
