"""Fixtures (being built)."""
