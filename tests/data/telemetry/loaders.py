"""Fixture loaders shared by tests/test_telemetry*.py, tests/test_gpu_panel*.py and
benchmarks/telemetry_cost.py (loaded by file path: tests/ is not a package)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent

# The one real nvidia-smi line we have (shared/reference/gpu-telemetry.md, H200, UUID
# elided there and completed here). Every other CSV fixture follows its format.
REFERENCE_SMI_LINE = ("0, NVIDIA H200, GPU-6a7f0c1e-0000-4000-8000-000000000000, 0, 0, 0, 143771, "
                      "36, 96.10, 700.00, 435, 3201, P0")


def load_module(name: str) -> ModuleType:
    """Import ``HERE/name.py`` once (cached in sys.modules under ``name``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def fake_nvml() -> ModuleType:
    return load_module("fake_nvml")


def events(name: str) -> list[dict[str, Any]]:
    """Every event of a JSON-lines fixture (meta lines included)."""
    with (HERE / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def frames(name: str) -> list[dict[str, Any]]:
    return [e for e in events(name) if e.get("type") == "frame"]


def text(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")
