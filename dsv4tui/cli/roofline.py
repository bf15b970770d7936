"""``dsv4tui roofline``: the memory-bound ceiling of decode, and a run's distance to it.

    dsv4tui roofline --gpu NAME --gpus N --active-params P --bytes-per-param B [--json]
    dsv4tui roofline HOST [--profile P] [--run ID|latest] [--json]
    dsv4tui roofline --run ID [--gpu ...] [--json]

With a HOST the GPU comes from the host's telemetry, the GPU count from the launch profile's
tp_size, and the parameters from the model's config.json on the host (``agent kernels
model-facts``) unless the profile or the flags say otherwise. Formula and sources:
docs/roofline.md.
"""

from __future__ import annotations

from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core import roofline
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, AgentFailed, ConfigError, ConnectError, UserError


def register(sub: Any) -> None:
    p = sub.add_parser("roofline")
    p.add_argument("host", nargs="?", help="read the GPU and the model facts on this host")
    p.add_argument("--profile", help="launch profile on HOST (default: the host's default)")
    p.add_argument("--run", metavar="ID", help="a stored run: its levels are the measured "
                   "tok/s (id, label or 'latest')")
    p.add_argument("--gpu", help="GPU name or key (h200, b200, rtx-pro-6000-server, ...)")
    p.add_argument("--gpus", type=int, help="GPUs the weights are spread over (TP x EP)")
    p.add_argument("--active-params", help="active parameters per token: 13B, 13e9, ...")
    p.add_argument("--bytes-per-param", type=float,
                   help="bytes per weight: 0.5 FP4, 1 FP8, 2 BF16")
    p.add_argument("--bandwidth", type=float, metavar="TB/S",
                   help="memory bandwidth per GPU, overriding the GPU table")
    p.add_argument("--concurrency", default=None,
                   help="C values (default: the run's levels, else 1,8,16)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


async def host_inputs(host: Any, profile_name: str | None) -> dict[str, Any]:
    """GPU names, TP size, profile overrides and model facts read on a connected host."""
    out: dict[str, Any] = {"gpu_names": [], "tp_size": None, "facts": None, "notes": [],
                           "active_params_b": None, "bytes_per_param": None, "profile": None,
                           "simulated": bool(getattr(host, "simulated", False))}
    if out["simulated"]:
        out["notes"].append(f"{host.name}: the GPUs are SIMULATED (the datasheet numbers are "
                            "real, the host's GPUs are not)")
    prof = None
    try:
        name, prof = host.config.profile(profile_name)
        out["profile"] = name
    except ConfigError as exc:
        if profile_name:
            raise
        out["notes"].append(str(exc))
    try:
        events = await host.agent.call("telemetry", "--count", "1", "--interval", "0.2",
                                       "--processes-every", "0", timeout=60.0)
        frame: dict[str, Any] = next((e for e in events if e.get("type") == "frame"), {})
        out["gpu_names"] = [str(g.get("name")) for g in frame.get("gpus") or [] if g.get("name")]
    except (AgentFailed, ConnectError) as exc:
        out["notes"].append(f"no GPU from the host's telemetry: {exc}")
    if prof is not None:
        out["tp_size"] = prof.tp_size
        out["active_params_b"] = getattr(prof, "active_params_b", None)
        out["bytes_per_param"] = getattr(prof, "bytes_per_param", None)
        try:
            events = await host.agent.call("kernels", "model-facts", "--model-path",
                                           prof.model_path, timeout=60.0)
            out["facts"] = next((e for e in events if e.get("type") == "model_facts"), None)
        except AgentFailed as exc:
            out["notes"].append(f"no model facts: {exc.message}")
    return out


def run(args: Any) -> int:
    concurrencies = (roofline.parse_concurrencies(args.concurrency)
                     if args.concurrency else None)
    if args.gpus is not None and args.gpus < 1:
        raise UserError("roofline: --gpus must be >= 1", EXIT_CONFIG)
    found: dict[str, Any] = {"gpu_names": [], "tp_size": None, "facts": None, "notes": []}
    if args.host:
        from dsv4tui.core.hosts.resolve import open_host

        settings, _ = load_settings(args)

        async def go() -> dict[str, Any]:
            async with open_host(args.host, settings) as host:
                return await host_inputs(host, args.profile)

        found = run_async(go())
    elif args.profile:
        raise UserError("roofline: --profile goes with a HOST", EXIT_CONFIG)
    run_obj = None
    levels: list[Any] = []
    if args.run:
        from dsv4tui.cli.kernels import resolve_run
        from dsv4tui.core.store import RunStore

        with RunStore() as store:
            run_id = resolve_run(store, args.run, args.host)
            run_obj = store.run(int(run_id or 0))
            levels = store.levels(run_obj.id) if run_obj else []
    facts = found.get("facts")
    active = args.active_params
    bpp = args.bytes_per_param
    sources: dict[str, str] = {}
    if active is None and found.get("active_params_b") is not None:
        active = float(found["active_params_b"]) * 1e9
        sources["active_params"] = "profile active_params_b"
    if bpp is None and found.get("bytes_per_param") is not None:
        bpp = found["bytes_per_param"]
        sources["bytes_per_param"] = "profile bytes_per_param"
    gpu = args.gpu or (found["gpu_names"][0] if found["gpu_names"] else None)
    gpus = args.gpus or found.get("tp_size") or (len(found["gpu_names"]) or None)
    if run_obj is not None:
        inputs = roofline.inputs_for_run(run_obj, facts=facts, gpu=gpu, gpus=gpus,
                                         active_params=active, bytes_per_param=bpp,
                                         bandwidth_tb_s=args.bandwidth)
    else:
        if active is None and facts and facts.get("decode_read_params"):
            active = facts["decode_read_params"]
            sources["active_params"] = f"config.json ({facts.get('config_path')})"
        if bpp is None and facts and facts.get("bytes_per_param"):
            bpp = facts["bytes_per_param"]
            sources["bytes_per_param"] = (f"{facts.get('weight_format')} "
                                          f"({facts.get('bytes_source')})")
        sources.setdefault("active_params", "--active-params")
        sources.setdefault("bytes_per_param", "--bytes-per-param")
        if args.gpu:
            sources["gpu"] = "--gpu"
        elif gpu:
            sources["gpu"] = f"{args.host} telemetry"
        if args.gpus:
            sources["gpus"] = "--gpus"
        elif found.get("tp_size"):
            sources["gpus"] = "profile tp_size"
        elif gpus:
            sources["gpus"] = "GPUs on the host"
        inputs = roofline.make_inputs(gpu=gpu, gpus=gpus, active_params=active,
                                      bytes_per_param=bpp, bandwidth_tb_s=args.bandwidth,
                                      sources=sources,
                                      moe=roofline.MoeLayout.from_facts(facts))
    measured = roofline.measured_from_levels(levels)
    cs = concurrencies or sorted(measured) or list(roofline.DEFAULT_CONCURRENCIES)
    result = roofline.compute(inputs, cs, measured)
    if run_obj is not None:
        result["run_id"] = run_obj.id
        result["run_label"] = run_obj.label
    if facts:
        result["model_facts"] = {k: facts.get(k) for k in (
            "model_path", "config_path", "total_params", "active_params", "decode_read_params",
            "experts", "experts_per_token", "weight_format", "bytes_per_param", "bytes_note")}
    if found.get("notes"):
        result["notes"] = found["notes"]
    if found.get("simulated"):
        result["simulated"] = True
    if args.json:
        print_json(result)
        return 0
    if run_obj is not None:
        print(f"run {run_obj.id}: {run_obj.label}")
    print(roofline.format_text(result))
    for note in found.get("notes") or []:
        print(f"note: {note}")
    return 0
