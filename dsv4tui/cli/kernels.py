"""``dsv4tui kernels``: where the GPU time goes (docs/kernels.md).

    dsv4tui kernels HOST [--profile P] [--steps 5] [-c 16] [--run ID|latest] [--json]
    dsv4tui kernels --url URL ...            the agent runs on this machine
    dsv4tui kernels --list [HOST] [--json]   stored captures
    dsv4tui kernels --show REF [REF] [--json]   one capture, or two side by side
    dsv4tui kernels --trace PATH... [--tensor-active PCT] [--json]   parse traces here
    dsv4tui kernels compare A B | --run R1 --run R2 [--json]   where the time moved

The agent on the host runs the steady load, SGLang's /start_profile and the trace parsing;
the summary is stored in the run store (attached to ``--run``). :func:`collect_kernels` is the
same path for the dashboard.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core.campaign.kernel_launch import family_cell, launch_cells, launch_lines
from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.campaign.kernels import (
    ServerContext,
    agent_args,
    collect_kernels,
    server_context,
    store_capture,
)
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, NotFoundError, UserError
from dsv4tui.core.text_table import table


def register(sub: Any) -> None:
    p = sub.add_parser("kernels")
    p.add_argument("host", nargs="*", metavar="HOST",
                   help="host name (its launch profile's server); or --url; or "
                   "'compare A B' (two capture refs)")
    p.add_argument("--url", help="any SGLang server; the agent runs on this machine (and must "
                   "see the server's trace directory)")
    p.add_argument("--profile", help="launch profile on HOST (default: the host's default)")
    p.add_argument("--model", help="model name for the load (default: discovered)")
    p.add_argument("--api-key-env", help="env var (on the host) holding the API key")
    p.add_argument("--steps", type=int, default=5, help="forward steps profiled (default 5)")
    p.add_argument("-c", "--concurrency", type=int, default=16,
                   help="streams of the steady load (default 16)")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of load before profiling")
    p.add_argument("--output-len", type=int, default=1024, help="tokens per load request")
    p.add_argument("--output-dir", help="trace directory on the host (default: agent cache)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for the trace files (default 300)")
    p.add_argument("--top", type=int, default=25, help="kernels kept (default 25)")
    p.add_argument("--run", metavar="ID", action="append",
                   help="attach to this run (id, label or 'latest'); with compare, twice: "
                   "the latest capture of each run")
    p.add_argument("--label", help="label of a capture not attached to a run")
    p.add_argument("--no-save", action="store_true", help="do not store the capture")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="list stored captures")
    mode.add_argument("--show", nargs="+", metavar="REF",
                      help="stored capture(s): id, 'latest' or 'run:ID'; two side by side")
    mode.add_argument("--trace", nargs="+", metavar="PATH",
                      help="parse trace files or directories on this machine")
    p.add_argument("--tensor-active", type=float, metavar="PCT",
                   help="with --trace: the measured tensor-pipe activity over the window")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


# --- collecting (CLI and dashboard): the core in dsv4tui.core.campaign.kernels -----------


def resolve_run(store: Any, run_ref: str | None, host: str | None) -> int | None:
    """A run id from ``--run``: an id, a label, or 'latest' (the newest on ``host``)."""
    if not run_ref:
        return None
    if run_ref.strip().lower() == "latest":
        runs = (store.runs(host=host, limit=1) if host else []) or store.runs(limit=1)
        if not runs:
            raise NotFoundError("--run latest: there are no runs yet")
        return int(runs[0].id)
    return int(store.find_run(run_ref).id)


class Progress:
    """The agent's progress, one line each, on stderr."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "kernels_target":
            sim = " (SIMULATED)" if ev.get("simulated") else ""
            print(safe_text(f"capturing kernels of {ev.get('url')} {ev.get('model')}{sim}: "
                            f"{ev.get('steps')} steps at C={ev.get('concurrency')}, "
                            f"{ev.get('backend') or '?'} backend"), file=self.stream, flush=True)
        elif kind == "kernels_phase":
            print(f"  {safe_text(ev.get('message'))}", file=self.stream, flush=True)


# --- printing --------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.1f}"


def _tc(flag: bool | None) -> str:
    return {True: "yes", False: "no", None: "?"}[flag]


def header_lines(summary: Mapping[str, Any], title: str | None = None) -> list[str]:
    server = summary.get("server") or {}
    load = summary.get("load") or {}
    tele = summary.get("telemetry") or {}
    decision = summary.get("tensor_decision") or {}
    steps = summary.get("steps") or {}
    dec, pre = steps.get("decode") or {}, steps.get("prefill") or {}
    lines = []
    what = "/".join(x for x in (server.get("backend"), server.get("checkpoint")
                                or server.get("quantization")) if x)
    head = title or "kernels"
    lines.append(f"{head}: {summary.get('model') or '-'}"
                 + (f"  [{what}]" if what else "")
                 + ("  SIMULATED" if server.get("simulated") else ""))
    files = summary.get("files") or []
    lines.append(f"  {len(files)} trace file(s), {summary.get('ranks')} rank(s), device "
                 f"{summary.get('device') or '-'}"
                 + (f", load {load_text(None, load)}" if load.get("concurrency") else ""))
    if load.get("batch_far"):
        lines.append(f"  WARNING: {load.get('batch_note')}")
    if dec.get("count"):
        text = f"  decode steps: {dec['count']} x {dec.get('mean_ms') or 0:.2f} ms on the GPU"
        if dec.get("interval_ms"):
            text += f", one every {dec['interval_ms']:.2f} ms"
        if dec.get("tok_s"):
            text += f" (bs {dec.get('mean_bs'):g} -> {dec['tok_s']:.1f} tok/s)"
        lines.append(text)
    if pre.get("count"):
        lines.append(f"  prefill steps: {pre['count']} x {pre.get('mean_ms') or 0:.2f} ms "
                     "(not in the shares)")
    lines.append(f"  {summary.get('basis_note')}")
    if decision.get("tensor_active_pct") is not None:
        lines.append(f"  tensor pipe {decision['tensor_active_pct']:.2f} % over the window "
                     f"({tele.get('source') or decision.get('source') or '?'}, "
                     f"{tele.get('frames', '?')} frames, {tele.get('scope', 'window')}); "
                     f"busy {decision.get('busy_pct')} %")
    else:
        why = tele.get("note") or "no telemetry"
        lines.append(f"  tensor pipe: n/a ({why}) -> tensor-core flags by kernel name only")
    lines.append(f"  how the flags were decided: {decision.get('note') or '-'}")
    return lines


def family_table(summary: Mapping[str, Any]) -> str:
    rows = []
    for f in summary.get("families") or []:
        rows.append([f["label"], _pct(f.get("share")), _ms(f.get("total_us")), str(f["calls"]),
                     _tc(f.get("tensor_cores")), f.get("tensor_basis") or "-", family_cell(f),
                     (f.get("top_kernels") or ["-"])[0][:40]])
    return table(rows, ["family", "share", "GPU ms", "calls", "tensor cores", "decided by",
                        "launches", "top kernel"])


def kernel_table(summary: Mapping[str, Any], top: int = 15) -> str:
    rows = []
    for k in (summary.get("kernels") or [])[:top]:
        rows.append([_pct(k.get("share")), k["family"], str(k["calls"]),
                     f"{k['mean_us']:.1f}", _ms(k.get("total_us")),
                     _tc(k.get("tensor_core_by_name")), *launch_cells(k), k["short_name"][:60]])
    return table(rows, ["share", "family", "calls", "mean us", "GPU ms", "TC name", "blocks",
                        "SMs", "occ", "kernel"])


def print_summary(summary: Mapping[str, Any], title: str | None = None, top: int = 15) -> None:
    print("\n".join(safe_text(line) for line in header_lines(summary, title)))
    print()
    print(family_table(summary))
    print()
    print(kernel_table(summary, top))
    rest = summary.get("kernels_rest") or {}
    if rest.get("count"):
        print(f"  ... {rest['count']} more kernels, {_pct(rest.get('share'))} together")
    print()
    print("\n".join(safe_text(line) for line in launch_lines(summary)))


def compare_table(items: Sequence[Any]) -> str:
    """Family shares of stored captures side by side (the first is the base)."""
    keys: list[str] = []
    labels: dict[str, str] = {}
    for item in items:
        for f in item.summary.get("families") or []:
            if f["family"] not in keys:
                keys.append(f["family"])
                labels[f["family"]] = f["label"]
    headers = ["family"]
    for i, item in enumerate(items):
        headers += [f"#{item.id} share", f"#{item.id} ms", f"#{item.id} TC"]
        if i:
            headers.append("vs first")
    rows = []
    for key in keys:
        row = [labels[key]]
        base = None
        for i, item in enumerate(items):
            f = next((x for x in item.summary.get("families") or [] if x["family"] == key), None)
            share = f.get("share") if f else None
            row += [_pct(share), _ms(f.get("total_us")) if f else "-",
                    _tc(f.get("tensor_cores")) if f else "-"]
            if i == 0:
                base = share
            else:
                row.append("-" if share is None or base is None
                           else f"{100 * (share - base):+.1f} pt")
        rows.append(row)
    step_row = ["decode step ms"]
    for i, item in enumerate(items):
        dec = (item.summary.get("steps") or {}).get("decode") or {}
        step_row += [f"{dec['interval_ms']:.2f}" if dec.get("interval_ms") else "-", "", ""]
        if i:
            step_row.append("")
    rows.append(step_row)
    return table(rows, headers)


def _brief(item: Any) -> dict[str, Any]:
    return item.to_dict(with_summary=False)


# --- the command -----------------------------------------------------------------------------


def _split_words(args: Any) -> None:
    """``HOST`` or ``compare A B`` into ``args.host`` and ``args.compare``."""
    words = list(args.host or [])
    args.compare = None
    if words and words[0] == "compare":
        args.compare = words[1:]
        args.host = None
        return
    if len(words) > 1:
        raise UserError(f"kernels: one HOST, not {' '.join(words)} (or 'compare A B')",
                        EXIT_CONFIG)
    args.host = words[0] if words else None
    if args.run and len(args.run) > 1:
        raise UserError("kernels: --run once (twice only with compare)", EXIT_CONFIG)
    args.run = args.run[0] if args.run else None


def _check(args: Any) -> None:
    _split_words(args)
    if args.compare is not None:
        if args.url or args.list or args.show or args.trace:
            raise UserError("kernels compare takes two capture refs or --run R1 --run R2, "
                            "nothing else", EXIT_CONFIG)
        if len(args.compare) + len(args.run or []) != 2 or (args.compare and args.run):
            raise UserError("kernels compare: give two captures (A B) or --run R1 --run R2",
                            EXIT_CONFIG)
        return
    modes = sum(bool(x) for x in (args.list, args.show, args.trace))
    if args.list:
        if args.url:
            raise UserError("kernels --list takes an optional HOST, not --url", EXIT_CONFIG)
        return
    if args.show or args.trace:
        if args.host or args.url:
            raise UserError("kernels --show/--trace take no HOST or --url", EXIT_CONFIG)
        return
    if modes == 0 and not (args.host or args.url):
        raise UserError("kernels: give a HOST or --url URL (or --list, --show, --trace)",
                        EXIT_CONFIG)
    if args.url and args.profile:
        raise UserError("kernels: --profile goes with a HOST, not --url", EXIT_CONFIG)
    if args.steps < 1 or args.concurrency < 1 or args.output_len < 1 or args.top < 1:
        raise UserError("kernels: --steps, --concurrency, --output-len and --top must be >= 1",
                        EXIT_CONFIG)
    if not args.timeout > 0 or not args.warmup >= 0:
        raise UserError("kernels: --timeout must be > 0 and --warmup >= 0", EXIT_CONFIG)
    if args.tensor_active is not None:
        raise UserError("kernels: --tensor-active goes with --trace", EXIT_CONFIG)


def run(args: Any) -> int:
    _check(args)
    if args.compare is not None:
        return _compare(args)
    if args.list:
        return _list(args)
    if args.show:
        return _show(args)
    if args.trace:
        return _trace(args)
    return _capture(args)


def _list(args: Any) -> int:
    from dsv4tui.core.store import RunStore
    from dsv4tui.core.store import kernels as kernel_store

    with RunStore() as store:
        items = kernel_store.captures(store, host=args.host)
    if args.json:
        print_json([_brief(i) for i in items])
        return 0
    if not items:
        print("no kernel captures yet (dsv4tui kernels HOST)")
        return 0
    rows = []
    for i in items:
        dec = (i.summary.get("steps") or {}).get("decode") or {}
        top = (i.summary.get("families") or [{}])[0]
        rows.append([str(i.id), "-" if i.run_id is None else str(i.run_id), i.host,
                     i.backend or "-", i.checkpoint or "-",
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(i.created_at)),
                     f"{dec['interval_ms']:.1f}" if dec.get("interval_ms") else "-",
                     "-" if i.tensor_active_pct is None else f"{i.tensor_active_pct:.1f}",
                     f"{top.get('label', '-')} {_pct(top.get('share'))}"
                     + (" SIM" if i.simulated else ""), i.launch_text])
    print(table(rows, ["ID", "run", "host", "backend", "checkpoint", "created", "step ms",
                       "tensor %", "largest family", "measured"]))
    return 0


def _show(args: Any) -> int:
    from dsv4tui.core.store import RunStore
    from dsv4tui.core.store import kernels as kernel_store

    with RunStore() as store:
        items = [kernel_store.find_capture(store, ref) for ref in args.show]
    if args.json:
        print_json({"captures": [i.to_dict() for i in items]})
        return 0
    if len(items) == 1:
        print_summary(items[0].summary, items[0].title, args.top)
        print(f"  measured: {items[0].launch_text}")
        return 0
    for item in items:
        print("\n".join(safe_text(x) for x in header_lines(item.summary, item.title)[:3]))
        print(f"  measured: {item.launch_text}")
    print()
    print(compare_table(items))
    for item in items:
        print()
        print(f"#{item.id}: " + "\n  ".join(safe_text(x) for x in launch_lines(item.summary)))
    return 0


def _compare(args: Any) -> int:
    from dsv4tui.core.campaign.kernel_compare import compare
    from dsv4tui.core.store import RunStore
    from dsv4tui.core.store import kernels as kernel_store

    with RunStore() as store:
        if args.run:
            refs = [f"run:{resolve_run(store, r, None)}" for r in args.run]
        else:
            refs = list(args.compare)
        a, b = (kernel_store.find_capture(store, ref) for ref in refs)
    result = compare(a, b, top=5)
    if args.json:
        print_json(result)
    else:
        print("\n".join(safe_text(line) for line in compare_lines(result)))
    return 0


def _ms2(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _ms3(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _signed(x: float | None, unit: str, spec: str = "+.1f") -> str:
    return "-" if x is None else f"{x:{spec}} {unit}"


def compare_lines(result: Mapping[str, Any]) -> list[str]:
    """``kernels compare``'s text: the two captures, the families side by side, the kernels
    that appeared, vanished or moved most."""
    a, b = result["a"], result["b"]
    per_token = result["per_token"]
    lines = [f"where the time moved: {a['title']} -> {b['title']}"]
    for tag, sd in (("A", a), ("B", b)):
        lines.append(f"  {tag} {sd['title']}{'  SIMULATED' if sd['simulated'] else ''}: "
                     f"load {sd['load'] or '-'}, batch {_ms2(sd['batch'])}, decode step "
                     f"{_ms2(sd['step_ms'])} ms GPU"
                     + (f", {sd['tok_s']:.1f} tok/s (batch / step interval)"
                        if sd["tok_s"] else "")
                     + ("  (batch FAR from C)" if sd["batch_far"] else ""))
    lines += [f"  {n}" for n in result["notes"]]
    lines.append("")
    headers = ["family", "A share", "B share", "change", "A ms/step", "B ms/step", "change"]
    if per_token:
        headers += ["A ms/token", "B ms/token", "change"]
    headers += ["A TC", "B TC", "tensor cores"]
    rows = []
    for f in result["families"]:
        fa, fb = f["a"], f["b"]
        row = [f["label"], _pct(fa["share"]), _pct(fb["share"]),
               _signed(f["share_change_pt"], "pt"), _ms2(fa["step_ms"]), _ms2(fb["step_ms"]),
               _signed(f["step_ms_change"], "ms")]
        if per_token:
            row += [_ms3(fa["token_ms"]), _ms3(fb["token_ms"]),
                    _signed(f["token_ms_change"], "ms", "+.3f")]
        row += [_tc(fa["tensor_cores"]) if fa["present"] else "-",
                _tc(fb["tensor_cores"]) if fb["present"] else "-", f["tensor_cores"]]
        rows.append(row)
    lines += table(rows, headers).splitlines()
    lines.append("")
    lines += [f"  {h}" for h in result["headline"]]
    ks = result["kernels"]
    for what, key in (("appeared in B", "appeared"), ("vanished from A", "vanished")):
        for k in ks[key]:
            sd = b if key == "appeared" else a
            lines.append(f"  {what}: {k['name'][:60]} ({k['family']}, {_pct(k['share'])}, "
                         f"{_ms2(k['step_ms'])} ms per step of {sd['title'].split()[0]})")
    for m in ks["moved"]:
        lines.append(f"  moved: {m['name'][:60]} ({m['family']}) {_pct(m['a']['share'])} -> "
                     f"{_pct(m['b']['share'])}, {_signed(m['step_ms_change'], 'ms per step')}")
    return lines


def _trace(args: Any) -> int:
    from dsv4tui.agent.kernels import trace_parse

    try:
        summary = trace_parse.parse_traces(args.trace, top=args.top)
    except trace_parse.TraceError as exc:
        raise UserError(f"kernels --trace: {exc}") from None
    trace_parse.attribute_tensor_cores(summary, args.tensor_active,
                                       "given" if args.tensor_active is not None else None)
    if args.json:
        print_json({"capture_id": None, "run_id": None, "summary": summary})
    else:
        print_summary(summary, "trace", args.top)
    return 0


def _capture(args: Any) -> int:
    from dsv4tui.core.bench_runner import open_bench
    from dsv4tui.core.store import RunStore

    settings, _ = load_settings(args)
    progress = None if args.json else Progress()
    run_id = None
    if args.run and not args.no_save:  # a wrong --run fails now, not after the capture
        with RunStore() as store:
            run_id = resolve_run(store, args.run, args.host or "local")

    async def go() -> tuple[dict[str, Any], ServerContext | None, float]:
        async with open_bench(settings, host=args.host, url=args.url, profile=args.profile,
                              model=args.model, api_key_env=args.api_key_env) as bench:
            ctx = None
            if args.host and not args.url:  # which server runs, and which launch started it
                with RunStore() as store:
                    ctx = await server_context(bench.host, store, args.profile)
            argv = agent_args(bench.target.url, steps=args.steps, concurrency=args.concurrency,
                              warmup=args.warmup, output_len=args.output_len,
                              output_dir=args.output_dir, timeout=args.timeout, top=args.top,
                              model=bench.target.model, api_key_env=bench.target.api_key_env)
            taken_at = time.time()
            summary = await collect_kernels(bench.agent, argv, progress)
            return summary, ctx, taken_at

    summary, ctx, taken_at = run_async(go())
    summary = {k: v for k, v in summary.items() if k not in ("type", "v")}
    host = ctx.host if ctx is not None else "local"
    capture_id = None
    if not args.no_save:
        with RunStore() as store:
            capture_id, run_id = store_capture(
                store, summary, ctx or ServerContext(host=host), run_id=run_id,
                label=args.label, taken_at=taken_at)
    else:
        run_id = None
    if args.json:
        print_json({"capture_id": capture_id, "run_id": run_id, "host": host,
                    "launch_id": ctx.launch_id if ctx else None,
                    "server_pid": ctx.server_pid if ctx else None, "summary": summary})
        return 0
    title = f"kernels #{capture_id}" if capture_id is not None else "kernels (not saved)"
    if run_id is not None:
        title += f" (run {run_id})"
    print_summary(summary, title, args.top)
    if ctx is not None and ctx.launch_id is not None:
        print(f"  measured: launch {ctx.launch_id}, server pid {ctx.server_pid}, "
              f"{safe_text(ctx.backend or '?')}/{safe_text(ctx.checkpoint or '?')}")
    return 0
