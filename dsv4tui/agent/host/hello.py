"""``hello``: what this host has — agent and Python versions, NVML, nvidia-smi, sglang, GPUs
(names, driver, CUDA compute capability); ``sglang-version``: the SGLang one interpreter has.

SGLang's version is read with importlib.metadata in a child interpreter (the profile's python,
with the profile's environment): sglang itself is never imported (that would import torch).
On a simulated host (``DSV4TUI_SIM_STATE`` set, as the telemetry does) the GPUs are the
simulator's, with the compute capability of the model they pretend to be.
"""

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


# Compute capability of the GPUs the simulator can pretend to be (name fragment -> "M.m").
_SIM_CAPABILITY = (("RTX PRO 6000", "12.0"), ("B300", "10.3"), ("GB300", "10.3"),
                   ("B200", "10.0"), ("GB200", "10.0"), ("H200", "9.0"), ("H100", "9.0"),
                   ("H20", "9.0"), ("A100", "8.0"))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("hello", help="report agent, python, NVIDIA driver and sglang presence")
    p.add_argument("--python", action="append", default=[],
                   help="also probe this interpreter for sglang (repeatable)")
    p.set_defaults(func=run)
    v = sub.add_parser("sglang-version", help="the SGLang version an interpreter has installed")
    v.add_argument("--python", required=True, help="the interpreter (a profile's python)")
    v.add_argument("--env-json", help="environment for it (the profile's env), a JSON object")
    v.set_defaults(func=run_version)


def capability_text(value: Any) -> Optional[str]:
    """NVML's (major, minor) -> ``"12.0"``."""
    try:
        major, minor = value
        return "%d.%d" % (int(major), int(minor))
    except (TypeError, ValueError):
        return None


def simulated_gpus() -> Optional[Dict[str, Any]]:
    """The simulator's GPUs (the same env the simulated telemetry reads), else None."""
    if not os.environ.get("DSV4TUI_SIM_STATE"):
        return None
    name = os.environ.get("DSV4TUI_SIM_GPU_NAME") or "NVIDIA H200"
    try:
        count = max(1, int(os.environ.get("DSV4TUI_SIM_GPUS") or 8))
    except ValueError:
        count = 8
    cap = next((c for frag, c in _SIM_CAPABILITY if frag in name), None)
    return {"available": True, "simulated": True, "driver": "simulated", "gpus": [name] * count,
            "compute_capability": [cap] * count}


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
        names: List[str] = []
        caps: List[Optional[str]] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            names.append(_text(pynvml.nvmlDeviceGetName(handle)))
            try:
                caps.append(capability_text(pynvml.nvmlDeviceGetCudaComputeCapability(handle)))
            except Exception:  # an old driver without the call
                caps.append(None)
        cuda = None
        try:
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        except Exception:
            pass
        return {"available": True, "driver": driver, "gpus": names, "compute_capability": caps,
                "cuda_driver_version": "%d.%d" % (cuda // 1000, cuda % 1000 // 10)
                if cuda else None}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_sglang(python: str, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """``{"present", "version", "python", "python_path"}`` of ``python`` (``error`` when the
    probe could not run); ``env`` is added to this process's environment for the probe."""
    full = None
    if env:
        full = dict(os.environ)
        full.update(env)
    try:
        out = subprocess.run([os.path.expanduser(python), "-c", _SGLANG_PROBE],
                             capture_output=True, text=True, timeout=60, env=full)
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
    sim = simulated_gpus()
    arch = sim or nvml
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
        # the GPUs the server runs on (the simulator's on a simulated host): the attention
        # backend picker marks the backends whose kernels are for other architectures
        compute_capability=next((c for c in arch.get("compute_capability") or [] if c), None),
        cuda_driver_version=nvml.get("cuda_driver_version"),
        simulated_gpus=sim,
        sglang=[probe_sglang(p) for p in pythons],
    )
    return 0


def run_version(args: Any) -> int:
    env: Dict[str, str] = {}
    if args.env_json:
        try:
            env = json.loads(args.env_json)
        except ValueError as exc:
            raise protocol.AgentError("usage", "--env-json is not valid JSON: %s" % exc,
                                      protocol.EXIT_USAGE) from None
        if not isinstance(env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise protocol.AgentError("usage", "--env-json must map strings to strings",
                                      protocol.EXIT_USAGE)
    protocol.emit("sglang_version", **probe_sglang(args.python, env))
    return 0
