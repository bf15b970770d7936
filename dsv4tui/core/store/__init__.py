"""The run store: SQLite file of runs, levels, requests, sanity results and launches."""

from dsv4tui.core.store.gpu_window import GpuWindow
from dsv4tui.core.store.models import RUN_STATUSES, Launch, Level, Run, normalise_level
from dsv4tui.core.store.runstore import (
    RunStore,
    StoreBusy,
    StoreReadOnly,
    StoreReplaced,
    StoreWait,
)
from dsv4tui.core.store.schema import LATEST as SCHEMA_VERSION
from dsv4tui.core.store.schema import StoreError

__all__ = ["RUN_STATUSES", "SCHEMA_VERSION", "GpuWindow", "Launch", "Level", "Run", "RunStore",
           "StoreBusy", "StoreError", "StoreReadOnly", "StoreReplaced", "StoreWait",
           "normalise_level"]
