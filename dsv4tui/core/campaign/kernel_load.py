"""How a kernel capture's load is named wherever it is shown: the CLI (``dsv4tui kernels``,
``--list``, ``--show``), the Kernels screen and the stored listing. The agent records the
batch a capture measured and flags one far from the load's C (``agent/kernels/capture.py``,
``measured_batch``); this says it in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def load_text(concurrency: int | None, load: Mapping[str, Any] | None,
              why: bool = False) -> str | None:
    """How a capture's load is named wherever it is shown (CLI, Kernels screen, listing):
    ``C=16, bs 15.9 measured``; a measured batch far from C (``batch_far``, decided by the
    agent) says so: ``C=16, bs 1 measured: FAR from C=16`` (``why``: and the agent's reason).
    None without a concurrency; a capture from before the batch was recorded: ``C=16``."""
    load = load or {}
    c = concurrency if concurrency is not None else load.get("concurrency")
    if c is None:
        return None
    text = f"C={c}"
    bs = load.get("measured_bs")
    if isinstance(bs, (int, float)) and not isinstance(bs, bool):
        text += f", bs {bs:g} measured"
        if load.get("batch_far"):
            text += f": FAR from C={c}"
            if why and load.get("batch_note"):
                text += f" ({load['batch_note']})"
    return text
