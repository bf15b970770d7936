"""Reusable widgets: GPU panel/strip (telemetry), log view, host bar, charts, tables."""
