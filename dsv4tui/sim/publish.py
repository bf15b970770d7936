"""Publish the simulated server's load to ``$DSV4TUI_SIM_STATE`` for simulated telemetry.

The file (docs/CONTRACTS.md) is rewritten atomically (tmp + os.replace) every 0.5 s by a
daemon thread and on every phase change.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

INTERVAL_S = 0.5


class StatePublisher:
    def __init__(self, path: str | None, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.path = path
        self.snapshot = snapshot
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.path:
            return
        self.publish()
        self._thread = threading.Thread(target=self._run, name="sim-state", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.publish()

    def publish(self, **override: Any) -> None:
        if not self.path:
            return
        data = {"v": 1, "pid": os.getpid(), "time": time.time(), **self.snapshot(), **override}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with self._lock:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump(data, fh)
                os.replace(tmp, self.path)
            except OSError:
                pass

    def stop(self, **final: Any) -> None:
        self._stop.set()
        self.publish(**final)
