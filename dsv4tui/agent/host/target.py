"""Which server a benchmark measures, and what that server really runs.

- :func:`find` picks the target: ``ours`` is the server this agent started (whichever profile),
  else a server answering on the fallback port the console names (one we did not start,
  reported as such), else a clear "no server running" error. ``url`` is an explicit URL.
- :func:`identity_problem` checks that the server answering is the one its record describes,
  not just that the port answers: the process listening on the port (ours: the recorded
  server's group) and what its ``/server_info`` says (port, model) against our launch record,
  or, for a server we did not start, against the profile the console names (``expect``). A
  profile that launches the simulator (``ours_only``: the demo) measures only the server
  dsv4tui started. :func:`find` refuses a mismatch (``not_ours``) with the one-line reason,
  so every sweep (CLI, dashboard, each campaign variant) is checked in this one place.
- :func:`describe` says what runs there, from the best source: the launch record of the server
  we started (``launch``: the argv and profile it was started with), else what the server
  reports (``server_info``: /server_info's args), else ``unknown``. Runs store this, never the
  console's config.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from dsv4tui.agent import protocol
from dsv4tui.agent.host import health, procs, server_state

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
    """The target of ``spec`` (``{"mode": "ours", "fallback": {host, port, model, model_path,
    api_key_env, ours_only}}`` or ``{"mode": "url", "url", "model", "api_key_env"[, "expect":
    the same keys as a fallback, when the URL is a profile's]}``). Raises ``not_ours`` when the
    server answering is not the one its record (or the profile) describes."""
    if spec.get("mode") == "url":
        expect = spec.get("expect")
        if expect:  # a profile's URL: ours if our server runs there, else checked as foreign
            state, ep = server_state.read_state(), _split(spec["url"])
            if server_state.ours_alive(state) and ep.port == int((state or {}).get("port") or 0):
                _refuse(identity_problem(state, None))
            elif health.port_open(ep.port, ep.host):
                _refuse(identity_problem(None, expect))
        return {"url": spec["url"], "model": spec.get("model"),
                "api_key_env": spec.get("api_key_env"), "ours": False}
    found = ours()
    if found is not None:
        _refuse(identity_problem(server_state.read_state(), None))
        if spec.get("model"):
            found["model"] = spec["model"]
        return found
    fb = spec.get("fallback") or {}
    port = fb.get("port")
    if port:
        probe = health.probe_host(fb.get("host"))
        if health.health(int(port), probe, 2.0)["status"] is not None:
            _refuse(identity_problem(None, fb))
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


def _refuse(why: Optional[str]) -> None:
    if why:
        raise protocol.AgentError("not_ours", why)


def _argv_value(argv: Any, *flags: str) -> Optional[str]:
    argv = [str(a) for a in argv or []]
    for i, arg in enumerate(argv[:-1]):
        if arg in flags:
            return argv[i + 1]
    for arg in argv:
        name, eq, value = arg.partition("=")
        if eq and name in flags:
            return value
    return None


def _same_model(a: Any, b: Any) -> bool:
    """Two spellings of one model path (a trailing slash, a relative vs an absolute path)."""
    x, y = str(a).rstrip("/"), str(b).rstrip("/")
    return x == y or x.rsplit("/", 1)[-1] == y.rsplit("/", 1)[-1]


def _in_our_group(pid: int, state: Dict[str, Any]) -> bool:
    """Is ``pid`` the recorded server, or a process of its group/session started after it?"""
    root, start = int(state.get("pid") or 0), state.get("proc_start")
    if pid == root:
        return procs.alive(pid, start)
    return pid in procs.group_members(int(state.get("pgid") or root), start)


def identity_problem(state: Optional[Dict[str, Any]], expect: Optional[Dict[str, Any]]
                     ) -> Optional[str]:
    """Why the server answering is not the one described -- ``state``: our launch record
    (server.json; its process group must own the port, and ``/server_info`` must report its
    port and model), or ``expect``: the profile of a server we did not start (its model; with
    ``ours_only``, none we did not start will do) -- or None when it is (or nothing says)."""
    rec = state if state is not None else {}
    want = expect if expect is not None else {}
    port = int(rec.get("port") or want.get("port") or 0)
    if not port or int(rec.get("node_rank") or 0) > 0:
        return None  # a node rank > 0 serves no HTTP: nothing to check there
    probe = health.probe_host(rec.get("host") or want.get("host"))
    owner = health.port_owner(port, probe)
    if state is not None and owner and owner.get("pid") and not _in_our_group(
            int(owner["pid"]), state):
        return ("port %d is served by %s, not by the server dsv4tui started (pid %s): "
                "refusing to measure a server that is not the one its launch record describes"
                % (port, health.owner_text(owner), state.get("pid")))
    if state is None and want.get("ours_only"):
        return ("port %d is served by %s, which dsv4tui did not start: the demo measures only "
                "the simulated server it starts (r in the dashboard, or dsv4tui server start "
                "HOST)" % (port, health.owner_text(owner) if owner
                           else "a process we cannot see"))
    key_env = rec.get("api_key_env") or want.get("api_key_env")
    info = health.server_info(port, probe, os.environ.get(key_env) if key_env else None,
                              timeout=3.0)
    if not info:
        return None  # no /server_info (not SGLang, or not up yet): the port is all we know
    said = info.get("model_path")
    if state is not None:
        prof = rec.get("profile") or {}
        model = _argv_value(rec.get("argv"), "--model-path", "--model") or prof.get("model_path")
        if info.get("port") is not None and str(info.get("port")) != str(port):
            return ("port %d answers with /server_info of a server on port %s, not the server "
                    "dsv4tui started there (pid %s): refusing to measure it"
                    % (port, info.get("port"), rec.get("pid")))
        if model and said and not _same_model(model, said):
            return ("port %d answers as model %s (its /server_info), but the server dsv4tui "
                    "started there (pid %s) runs %s: refusing to measure it"
                    % (port, said, rec.get("pid"), model))
        return None
    names = [n for n in (want.get("model_path"), want.get("model")) if n]
    served = [n for n in (said, info.get("served_model_name")) if n]
    if names and served and not any(_same_model(a, b) for a in names for b in served):
        return ("port %d answers as model %s (its /server_info), not the profile's %s: not the "
                "server the profile describes (measure it as it is with --url, or adopt it: "
                "dsv4tui server adopt HOST)" % (port, served[0], names[0]))
    return None


def _split(url: str) -> Any:
    from dsv4tui.agent.bench.openai_stream import Endpoint

    return Endpoint(url)


def host_gpus() -> Dict[str, Any]:
    """The GPUs a run ran on: names, driver, CUDA driver, compute capability (the
    simulator's on a simulated host, as its telemetry; else NVML's; empty without either)."""
    from dsv4tui.agent.host import hello

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
