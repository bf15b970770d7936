"""What every command needs before it runs, whichever face it opens: the settings named by
``--config`` (or the default file), and a coroutine run to its end with Ctrl-C as exit 130."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from dsv4tui.core import config
from dsv4tui.core.errors import EXIT_INTERRUPTED, UserError

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        raise UserError("interrupted", EXIT_INTERRUPTED) from None


def load_settings(args: Any) -> tuple[config.Settings, Path]:
    path = Path(args.config).expanduser() if getattr(args, "config", None) else None
    return config.load(path)
