"""Apps with frozen data for the snapshot tests (no live host)."""
