"""Which server a benchmark measures, and what that server really runs.

- :func:`find` picks the target: ``ours`` is the server this agent started (whichever profile),
  else a server answering on the fallback port the console names (one we did not start,
  reported as such), else a clear "no server running" error. ``url`` is an explicit URL.
- :func:`describe` says what runs there, from the best source: the launch record of the server
  we started (``launch``: the argv and profile it was started with), else what the server
  reports (``server_info``: /server_info's args), else ``unknown``. Runs store this, never the
  console's config.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from dsv4tui.agent import health, protocol, server_state

# SGLang --quantization values -> the checkpoint format they load.
_CHECKPOINTS = (
    (("modelopt_fp4", "nvfp4_online", "petit_nvfp4", "modelopt_mixed"), "NVFP4"),
    (("mxfp4", "quark_mxfp4", "mxfp_w4a8"), "MXFP4"),
    (("fp8", "modelopt_fp8", "w8a8_fp8", "mxfp8", "modelopt"), "FP8"),
)


def checkpoint_of(quantization: Optional[str]) -> Optional[str]:
    if not quantization:
        return None
    for names, label in _CHECKPOINTS:
        if quantization in names:
            return label
    return str(quantization)


def _url(host: Optional[str], port: int) -> str:
    probe = health.probe_host(host)
    return "http://%s:%d" % ("[%s]" % probe if ":" in probe else probe, port)


def ours() -> Optional[Dict[str, Any]]:
    """Our live server as a target, or None."""
    state = server_state.read_state()
    if not server_state.ours_alive(state):
        return None
    assert state is not None
    prof = state.get("profile") or {}
    return {"url": _url(state.get("host"), int(state.get("port") or 30000)),
            "model": prof.get("served_model_name") or prof.get("model_path"),
            "api_key_env": state.get("api_key_env"), "ours": True, "pid": state.get("pid")}


def find(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The target of ``spec`` (``{"mode": "ours", "fallback": {host, port, model,
    api_key_env}}`` or ``{"mode": "url", "url", "model", "api_key_env"}``)."""
    if spec.get("mode") == "url":
        return {"url": spec["url"], "model": spec.get("model"),
                "api_key_env": spec.get("api_key_env"), "ours": False}
    found = ours()
    if found is not None:
        if spec.get("model"):
            found["model"] = spec["model"]
        return found
    fb = spec.get("fallback") or {}
    port = fb.get("port")
    if port:
        probe = health.probe_host(fb.get("host"))
        if health.health(int(port), probe, 2.0)["status"] is not None:
            owner = health.port_owner(int(port), probe)
            return {"url": _url(fb.get("host"), int(port)), "model": fb.get("model"),
                    "api_key_env": fb.get("api_key_env"), "ours": False,
                    "foreign": owner or {"pid": None},
                    "notice": "port %s is served by %s, which dsv4tui did not start" % (
                        port, health.owner_text(owner) if owner else "a process we cannot see")}
    where = " and nothing answers on port %s" % port if port else ""
    raise protocol.AgentError(
        "no_server", "no server is running on this host: none started by dsv4tui%s; start "
        "one first (dsv4tui server start HOST; r in the dashboard)" % where)


def _split(url: str) -> Any:
    from dsv4tui.agent.openai_stream import Endpoint

    return Endpoint(url)


def host_gpus() -> Dict[str, Any]:
    """The GPUs a run ran on: names, driver, CUDA driver, compute capability (the
    simulator's on a simulated host, as its telemetry; else NVML's; empty without either)."""
    from dsv4tui.agent import hello

    found = hello.simulated_gpus() or hello.nvml_gpus()
    if not found.get("available"):
        return {}
    caps = [c for c in found.get("compute_capability") or [] if c]
    return {"gpus": list(found.get("gpus") or []), "driver": found.get("driver"),
            "cuda_driver_version": found.get("cuda_driver_version"),
            "compute_capability": caps[0] if caps else None,
            "simulated": bool(found.get("simulated"))}


def from_server_info(info: Dict[str, Any]) -> Dict[str, Any]:
    """What a server's ``/server_info`` says it runs, as :func:`describe`'s fields (source
    ``server_info``): backend, quantization, checkpoint, attention backends, the server args
    (less live state and secrets), version, model path, simulated or not. Also what a
    bench_serving result file's ``server_info`` is read with (``runs import``)."""
    meta: Dict[str, Any] = {
        "source": "server_info", "backend": info.get("moe_runner_backend") or "unknown",
        "quantization": info.get("quantization"),
        "checkpoint": checkpoint_of(info.get("quantization")) or "unknown",
        "attention_backend": info.get("attention_backend"),
        "server_args": health.server_args(info) or {},
        "dsv4_attn_backend": info.get("dsv4_attn_backend"),
        "dsv4_prefill_backend": info.get("dsv4_prefill_backend"),
        "sglang_version": info.get("version"), "model_path": info.get("model_path"),
        "simulated": bool(info.get("simulated"))}
    sim = info.get("simulated")
    if isinstance(sim, dict) and sim.get("checkpoint"):
        meta["checkpoint"] = sim["checkpoint"]
    return meta


def describe(target: Dict[str, Any]) -> Dict[str, Any]:
    """What runs at ``target``: backend, checkpoint, quantization, attention backend, argv,
    server args and version, simulated or not, and where each came from (``source``); and,
    for a server on this host, the GPUs and driver it runs on (``gpus``, ``driver``,
    ``compute_capability``; also under ``server_args["_host"]``, which the run store keeps,
    so two runs can be told apart later)."""
    meta: Dict[str, Any] = {"source": "unknown", "backend": "unknown", "checkpoint": "unknown",
                            "quantization": None, "attention_backend": None, "argv": None,
                            "server_args": None, "sglang_version": None, "simulated": False,
                            "pid": target.get("pid"), "profile_name": None, "model_path": None,
                            "launch_started_at": None, "gpus": None, "driver": None,
                            "compute_capability": None, "dsv4_attn_backend": None,
                            "dsv4_prefill_backend": None}
    info = None
    try:
        ep = _split(target["url"])
        key_env = target.get("api_key_env")
        info = health.server_info(ep.port, ep.host, os.environ.get(key_env) if key_env else None)
    except ValueError:
        info = None
    if info:
        meta.update(from_server_info(info))
    if target.get("ours"):
        state = server_state.read_state() or {}
        prof = state.get("profile") or {}
        meta.update(source="launch", argv=state.get("argv"), pid=state.get("pid"),
                    launch_started_at=state.get("started_at"), profile_name=prof.get("name"),
                    backend=prof.get("moe_runner_backend") or (
                        meta["backend"] if meta["backend"] != "unknown" else "auto"),
                    quantization=prof.get("quantization"),
                    checkpoint=prof.get("checkpoint") or checkpoint_of(prof.get("quantization"))
                    or "default",
                    attention_backend=prof.get("attention_backend") or meta["attention_backend"],
                    dsv4_attn_backend=prof.get("dsv4_attn_backend") or meta["dsv4_attn_backend"],
                    dsv4_prefill_backend=prof.get("dsv4_prefill_backend")
                    or meta["dsv4_prefill_backend"],
                    model_path=prof.get("model_path") or meta["model_path"])
    if target.get("ours") or target.get("foreign"):  # a server on this host: its GPUs
        gpus = host_gpus()
        if gpus:
            meta.update(gpus=gpus["gpus"], driver=gpus["driver"],
                        compute_capability=gpus["compute_capability"])
            meta["server_args"] = dict(meta["server_args"] or {}, _host=gpus)
    return meta


def add_parser(sub: Any) -> None:
    p = sub.add_parser("target", help="which server a benchmark would measure, and what it runs")
    p.add_argument("--target-json", required=True,
                   help='{"mode": "ours", "fallback": {...}} or {"mode": "url", "url": ...}')
    p.set_defaults(func=run)


def run(args: Any) -> int:
    import json

    try:
        spec = json.loads(args.target_json)
    except ValueError as exc:
        raise protocol.AgentError("usage", "--target-json is not valid JSON: %s" % exc,
                                  protocol.EXIT_USAGE) from None
    if not isinstance(spec, dict):
        raise protocol.AgentError("usage", "--target-json must be a JSON object",
                                  protocol.EXIT_USAGE)
    found = find(spec)
    protocol.emit("bench_target_info", target=found, meta=describe(found))
    return 0
