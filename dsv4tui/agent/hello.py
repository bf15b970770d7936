"""``hello``: what this host has — agent and Python versions, NVML, nvidia-smi, sglang, GPUs."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any, Dict, List, Optional

from dsv4tui import __version__
from dsv4tui.agent import protocol

_SGLANG_PROBE = (
    "import importlib.util, json, sys\n"
    "spec = importlib.util.find_spec('sglang')\n"
    "version = None\n"
    "if spec is not None:\n"
    "    try:\n"
    "        from importlib.metadata import version as v\n"
    "        version = v('sglang')\n"
    "    except Exception:\n"
    "        version = None\n"
    "print(json.dumps({'present': spec is not None, 'version': version,"
    " 'python': sys.version.split()[0]}))\n"
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("hello", help="report agent, python, NVIDIA driver and sglang presence")
    p.add_argument("--python", action="append", default=[],
                   help="also probe this interpreter for sglang (repeatable)")
    p.set_defaults(func=run)


def nvml_gpus() -> Dict[str, Any]:
    """GPU names and driver through NVML; ``{"available": False, "reason": ...}`` without it."""
    try:
        import pynvml  # bundled nvidia-ml-py
    except ImportError as exc:
        return {"available": False, "reason": "pynvml not importable: %s" % exc}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded ...
        return {"available": False, "reason": str(exc) or type(exc).__name__}
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            names.append(_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))))
        return {"available": True, "driver": driver, "gpus": names}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_sglang(python: str) -> Dict[str, Any]:
    try:
        out = subprocess.run([python, "-c", _SGLANG_PROBE], capture_output=True, text=True,
                             timeout=60)
    except FileNotFoundError:
        return {"python": python, "present": False, "error": "interpreter not found"}
    except subprocess.TimeoutExpired:
        return {"python": python, "present": False, "error": "probe timed out"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
        return {"python": python, "present": False, "error": tail}
    try:
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"python": python, "present": False, "error": "unreadable probe output"}
    info["python_path"] = python
    return info


def run(args: Any) -> int:
    nvml = nvml_gpus()
    smi: Optional[str] = shutil.which("nvidia-smi")
    pythons: List[str] = [sys.executable] + [p for p in args.python if p != sys.executable]
    protocol.emit(
        "hello",
        agent_version=__version__,
        protocol=protocol.PROTOCOL_VERSION,
        python=platform.python_version(),
        python_path=sys.executable,
        hostname=socket.gethostname(),
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        nvml=nvml,
        nvidia_smi=smi,
        gpus=nvml.get("gpus", []),
        driver=nvml.get("driver"),
        sglang=[probe_sglang(p) for p in pythons],
    )
    return 0
