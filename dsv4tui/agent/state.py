"""Where the agent keeps its state on the host (server state file, locks, uploaded bundle)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional


def cache_dir() -> Path:
    path = Path(os.environ.get("DSV4TUI_AGENT_HOME") or "~/.cache/dsv4tui").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: str, data: Dict[str, Any]) -> None:
    """Write ``path`` atomically (a temp file renamed over it); on a full disk, no half copy."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, default=str)
        os.replace(tmp, path)
    except OSError:  # a full disk: no half-written copy left taking room
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: str) -> Optional[Dict[str, Any]]:
    """A JSON object file, or None (missing, unreadable, not an object)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
