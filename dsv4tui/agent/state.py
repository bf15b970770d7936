"""Where the agent keeps its state on the host (server state file, locks, uploaded bundle)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    path = Path(os.environ.get("DSV4TUI_AGENT_HOME") or "~/.cache/dsv4tui").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
