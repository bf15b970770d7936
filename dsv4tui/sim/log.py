"""SGLang-format log lines: ``[%Y-%m-%d %H:%M:%S TP0] message`` on stderr, flushed per line."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class SimLog:
    """Writes log lines with SGLang's rank prefixes (``TP0``, ``DP0 TP3 EP3``)."""

    def __init__(self, tp_size: int, dp_size: int = 1, ep_size: int = 1,
                 stream: TextIO | None = None, local_ranks: range | None = None) -> None:
        self.tp_size = max(tp_size, 1)
        # the TP ranks whose processes run on this node (all of them on one node)
        self.local_ranks = local_ranks if local_ranks is not None else range(self.tp_size)
        self.dp_size = max(dp_size, 1)
        self.ep_size = max(ep_size, 1)
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def prefix(self, rank: int | None) -> str:
        if rank is None or (self.tp_size == 1 and self.dp_size == 1):
            return ""
        parts = []
        if self.dp_size > 1:
            parts.append(f"DP{rank * self.dp_size // self.tp_size}")
        parts.append(f"TP{rank}")
        if self.ep_size > 1:
            parts.append(f"EP{rank % self.ep_size}")
        return " " + " ".join(parts)

    def write_raw(self, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def info(self, message: str, rank: int | None = -1) -> None:
        """``rank``: the TP rank of the prefix (default: this node's first), None: none."""
        if rank == -1:
            rank = self.local_ranks.start
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.write_raw(f"[{stamp}{self.prefix(rank)}] {message}\n")

    def all_ranks(self, message: str) -> None:
        for rank in self.local_ranks:
            self.info(message, rank)

    def plain(self, message: str) -> None:
        """A line without the ``[time]`` prefix (traceback lines, tqdm)."""
        self.write_raw(message + "\n")

    def http(self, message: str) -> None:
        """uvicorn's lines as SGLang configures them: ``[time] INFO:     message``."""
        self.info(f"INFO:     {message}", None)
