"""``dsv4tui runs list|show ID [--diff ID]|compare ID ID ...|report ID ID ...|export (ID | --all)|
import FILE|delete ID [--yes]``."""

from __future__ import annotations

import sys
import time
from typing import Any

from dsv4tui.cli.output import ask, print_json
from dsv4tui.cli.sweep import level_table
from dsv4tui.core.campaign import export
from dsv4tui.core.campaign.columns import change_title, fmt_change
from dsv4tui.core.campaign.compare import compare_runs, sim_name
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.verdict import canary_lines, verdict_lines
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.core.store import Level, Run, RunStore
from dsv4tui.core.text_table import table

REQUEST_CSV = export.REQUEST_CSV
run_detail = export.run_detail


def register(sub: Any) -> None:
    p = sub.add_parser("runs")
    rsub = p.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    q = rsub.add_parser("list", help="saved runs, newest first")
    q.add_argument("--host", help="only runs on this host")
    q.add_argument("--limit", type=int, default=50)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_list)
    q = rsub.add_parser("show", help="one run: its levels, GPU summaries and sanity")
    q.add_argument("run", metavar="ID", help="run id (or label: the newest with it)")
    q.add_argument("--requests", action="store_true", help="with --json: every request too")
    q.add_argument("--diff", metavar="ID", help="the run whose server args it is compared "
                   "with (default: the previous run on the same host)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_show)
    q = rsub.add_parser("compare", help="tok/s, TTFT p50/p99, TPOT p50, tensor, tok/s per kW "
                        "and roofline %% per C, %% change against the baseline run")
    q.add_argument("runs", metavar="ID", nargs="+")
    q.add_argument("--baseline", metavar="ID",
                   help="the run the %% change is against (default: the first ID)")
    q.add_argument("--format", choices=("table", "json", "csv", "md"), default="table",
                   help="table (default), json, csv (numbers only) or md")
    q.add_argument("--json", action="store_true", help="same as --format json")
    q.set_defaults(func=run_compare)
    q = rsub.add_parser("report", help="a report to send: the comparison, its charts, what "
                        "differs between the runs' launches, sanity, GPUs and versions (HTML: "
                        "one file; md: its SVG charts beside it)")
    q.add_argument("runs", metavar="ID", nargs="+")
    q.add_argument("--baseline", metavar="ID",
                   help="the run the %% change is against (default: the first that measured)")
    q.add_argument("--out", "-o", metavar="FILE", help="where to write it (default: the data "
                   "dir's reports folder)")
    q.add_argument("--format", choices=("html", "md"), default=None,
                   help="html or md (default: --out's suffix, .html or .md; "
                   "else html); a suffix of another format is refused")
    q.add_argument("--theme", choices=("light", "dark"), default="light")
    q.add_argument("--json", action="store_true", help="print what was written as JSON")
    q.set_defaults(func=run_report)
    q = rsub.add_parser("export", help="a run as JSON (everything), CSV (requests) or "
                        "Markdown; --all: every run as JSON")
    q.add_argument("run", metavar="ID", nargs="?")
    q.add_argument("--all", action="store_true", help="every stored run (JSON)")
    q.add_argument("--format", choices=("json", "csv", "md", "bench-serving"), default=None,
                   help="json (default), csv, md, or bench-serving: SGLang bench_serving's "
                   "result lines, one per level")
    q.add_argument("--json", action="store_true", help="same as --format json (the default)")
    q.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    q.set_defaults(func=run_export)
    q = rsub.add_parser("import", help="read another tool's result file into the store as a "
                        "run, marked imported: SGLang bench_serving lines, vllm bench serve "
                        "--save-result JSON, aiperf's profile export (.json / .jsonl), "
                        "guidellm's benchmarks.json / .yaml (recognised by content)")
    q.add_argument("file", metavar="FILE")
    q.add_argument("--label", help="the run's label (default: the exported run's, or the "
                   "file's name)")
    q.add_argument("--simulated", action="store_true",
                   help="the file measured a simulator (aiperf, guidellm and vllm files do "
                   "not say so; bench_serving's server_info does): mark the run SIMULATED")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_import)
    q = rsub.add_parser("delete", help="delete a run and everything measured in it (asks "
                        "first)")
    q.add_argument("run", metavar="ID")
    q.add_argument("--yes", "-y", action="store_true", help="do not ask")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_delete)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _num(v: Any, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _list_status(run: Run) -> str:
    """A running run's status says whose it is, briefly (``runs show`` says it in full)."""
    state = run.owner_state
    if state == "campaign":
        return "running (on the host)"
    if state == "elsewhere":
        return f"running? ({run.owner_host})"
    if state == "gone":
        return "interrupted?"
    return run.status


def run_list(args: Any) -> int:
    with RunStore() as store:
        runs = store.runs(host=args.host, limit=args.limit)
    if args.json:
        print_json([r.to_dict() for r in runs])
        return 0
    if not runs:
        print("no runs yet (dsv4tui sweep HOST --label L)")
        return 0
    rows = [[str(r.id), r.label, r.target, r.backend or "-", r.checkpoint or "-",
             _when(r.started_at), _list_status(r) + (" SIM" if r.simulated else ""),
             _num(r.best_tok_s),
             {True: "pass", False: "FAIL", None: "-"}[r.sanity_passed]] for r in runs]
    print(table(rows, ["ID", "label", "target", "backend", "checkpoint", "started", "status",
                       "best tok/s", "sanity"]))
    return 0


def _gpu_table(levels: list[Level]) -> str | None:
    rows = []
    for lv in levels:
        if not lv.gpus:
            continue
        util = [g["util_mean"] for g in lv.gpus if g.get("util_mean") is not None]
        sm = [g["sm_mean"] for g in lv.gpus if g.get("sm_mean") is not None]
        dram = [g["dram_mean"] for g in lv.gpus if g.get("dram_mean") is not None]
        rows.append([str(lv.concurrency), str(len(lv.gpus)),
                     _num(sum(util) / len(util) if util else None),
                     _num(lv.tensor_mean, "{:.2f}"), _num(sum(sm) / len(sm) if sm else None),
                     _num(sum(dram) / len(dram) if dram else None), _num(lv.power_w, "{:.0f}"),
                     _num(lv.tok_s_per_kw)])
    if not rows:
        return None
    return table(rows, ["C", "GPUs", "util % mean", "tensor % mean", "SM % mean",
                        "DRAM % mean", "power W (all GPUs)", "tok/s/kW"])


def _previous_run(store: RunStore, run: Run) -> Run | None:
    """The run on the same host (or URL) just before ``run``."""
    older = [r for r in store.runs(host=run.host) if r.target == run.target
             and (r.started_at, r.id) < (run.started_at, run.id)]
    return max(older, key=lambda r: (r.started_at, r.id), default=None)


def server_lines(facts: dict[str, Any]) -> list[str]:
    """What a run's server said it ran: SGLang version, GPUs, driver, how many args."""
    from dsv4tui.core.campaign.compare import gpus_text

    host = facts.get("host") or {}
    bits = []
    if facts.get("sglang_version"):
        bits.append(f"SGLang {facts['sglang_version']}")
    gpus = gpus_text(host.get("gpus") or facts.get("gpu_names"), host.get("compute_capability"))
    if gpus:
        bits.append(gpus + (" SIMULATED" if host.get("simulated") else ""))
    if host.get("driver"):
        cuda = f" (CUDA {host['cuda_driver_version']})" if host.get("cuda_driver_version") \
            else ""
        bits.append(f"driver {host['driver']}{cuda}")
    args = facts.get("args") or {}
    bits.append(f"{len(args)} server args recorded" if args else "no server args recorded")
    return [" · ".join(bits)]


def _has_facts(entry: Any) -> bool:
    """Whether a run recorded anything about its server (an imported one does not)."""
    if not isinstance(entry, dict):
        return False
    host = entry.get("host") or {}
    return bool(entry.get("sglang_version") or entry.get("args") or host.get("gpus"))


def run_show(args: Any) -> int:
    from dsv4tui.core.campaign.compare import run_server_facts, server_args_differences

    with RunStore() as store:
        run = store.find_run(args.run)
        detail = run_detail(store, run, args.requests)
        levels = store.levels(run.id)
        other = store.find_run(args.diff) if args.diff else _previous_run(store, run)
        ids = [run.id] + ([other.id] if other is not None and other.id != run.id else [])
        facts = run_server_facts(store, ids)
    mine = facts.get(run.id, {})
    diffs = server_args_differences({i: facts.get(i) for i in reversed(ids)}, limit=40) \
        if len(ids) == 2 else []
    if args.json:
        detail["server"] = mine
        detail["server_args_differences"] = {"against": ids[1] if len(ids) == 2 else None,
                                             "lines": diffs}
        print_json(detail)
        return 0
    s = safe_text
    print(f"run {run.id}: {s(run.label)}  [{run.status_text}"
          f"{' SIMULATED' if run.simulated else ''}]")
    print(f"  target   {s(run.target)}  model {s(run.model or '-')}  server "
          f"{s(run.server_version or '-')}")
    print(f"  profile  {s(run.profile_name or '-')}  backend {s(run.backend or '-')}  "
          f"checkpoint {s(run.checkpoint or '-')}  launch {run.launch_id or '-'}")
    if run.gpu_names:
        print(f"  GPUs     {len(run.gpu_names)} x {s(run.gpu_names[0])}")
    for line in server_lines(mine):
        print(f"  server   {s(line)}")
    if len(ids) == 2:
        how = "" if args.diff else " (the previous run there)"
        if diffs:
            print(f"  differs from run #{ids[1]}{how}:")
            for line in diffs:
                print(f"    {s(line)}")
        elif _has_facts(facts.get(ids[0])) and _has_facts(facts.get(ids[1])):
            print(f"  the same server as run #{ids[1]}{how}")
        else:  # nothing recorded on one side: no claim either way
            print(f"  server facts to compare with run #{ids[1]}{how}: not recorded")
    print(f"  started  {_when(run.started_at)}  finished {_when(run.finished_at)}")
    if run.error:
        print(f"  note     {s(run.error)}")
    if levels:
        print()
        print(level_table([lv.to_dict() for lv in levels]))
        gpu = _gpu_table(levels)
        if gpu:
            print()
            print(gpu)
    for case in detail["sanity"]:
        mark = "PASS" if case["passed"] else "FAIL"
        answer = s((case["answer"] or "").strip()[:60])
        print(f"  sanity {mark} {s(case['name'])}: '{answer}'")
    return 0


def compare_text(cmp: Any) -> str:
    """The comparison as the CLI prints it: who is who, then one row per C and run."""
    base = cmp.baseline_run
    note = cmp.simulated_note()
    lines = [note] if note else []
    lines += [f"#{r.id} = {safe_text(sim_name(r.label, r.simulated))} ({safe_text(r.target)}, "
              f"{safe_text(r.backend or '-')}/{safe_text(r.checkpoint or '-')})"
              + ("  <- baseline" if base is not None and r.id == base.id else "")
              for r in cmp.runs]
    headers = ["C", "run"]
    for col in cmp.columns():
        headers.append(col.header)
        if col.change:
            headers.append(change_title(cmp.baseline_id))
    rows = []
    for row in cmp.rows():
        cells = [row.load if row.rate is not None else str(row.concurrency),
                 f"#{row.run.id}" + (" SIM" if row.run.simulated else "")]
        for col in cmp.columns():
            cells.append(col.text(row.values.get(col.key)))
            if col.change:
                cells.append("base" if row.is_baseline and row.point is not None
                             else fmt_change(row.changes.get(col.key)))
        rows.append(cells)
    lines += ["", table(rows, headers)]
    for diff in cmp.differences():
        lines.append(f"note: the workloads differ, so the % change mixes two things: "
                     f"{safe_text(diff)}")
    lines += definition_lines(cmp)
    server = cmp.server_args_differences()
    if server:
        lines.append("the servers differ:")
        lines += [f"  {safe_text(d)}" for d in server]
    said = verdict_lines(cmp.verdicts(), _load_of) + canary_lines(cmp.canary_verdicts())
    lines += ([""] if said else []) + [safe_text(line) for line in said]
    return "\n".join(lines)


def definition_lines(cmp: Any) -> list[str]:
    """Whose definitions each run's columns follow, when a run is another tool's (imported),
    and a warning for each metric the comparison mixes (docs/metrics.md has the table)."""
    notes = cmp.definition_notes()
    if not notes:
        return []
    return ["definitions (docs/metrics.md):"] + [
        safe_text(n) if n.startswith("warning:") else f"  {safe_text(n)}" for n in notes]


def _load_of(load: Any) -> str:
    from dsv4tui.core.campaign.compare import load_text

    return load_text(load)


def distinct_runs(store: RunStore, refs: list[str], what: str) -> None:
    """Refuse (exit 2) the same run given twice (by id, or a label naming it): a run compared
    with itself says nothing, and quietly dropping one would show fewer runs than asked."""
    seen: dict[int, str] = {}
    for ref in refs:
        run = store.find_run(ref)
        if run.id in seen:
            same = (f"{seen[run.id]!r} and {ref!r} are both run #{run.id}"
                    if seen[run.id] != ref else f"run {ref} is given twice")
            raise UserError(f"runs {what}: {safe_text(same)}; a run compared with itself says "
                            "nothing (give different runs)", EXIT_CONFIG)
        seen[run.id] = ref


def run_compare(args: Any) -> int:
    fmt = "json" if args.json else args.format
    with RunStore() as store:
        distinct_runs(store, args.runs, "compare")
        cmp = compare_runs(store, args.runs, args.baseline)
    if fmt == "json":
        print_json(cmp.to_json())
    elif fmt == "csv":
        sys.stdout.write(export.compare_csv(cmp))
    elif fmt == "md":
        sys.stdout.write(export.compare_markdown(cmp))
    else:
        print(compare_text(cmp))
    return 0


def report_paths(out: str | None, fmt: str | None, stem: str) -> tuple[Any, str]:
    """The report's file and format: ``--out`` (its suffix picks the format; another suffix is
    refused) or the reports folder."""
    from pathlib import Path

    from dsv4tui.core.campaign import report

    path = Path(out).expanduser() if out else None
    if path is not None and not path.parent.is_dir():  # a typo must not create directories
        raise UserError(f"--out: no such directory: {safe_text(str(path.parent))}", EXIT_CONFIG)
    kind = report.format_of(path, fmt)
    return (path if path is not None else report.default_path(stem, kind)), kind


def print_written(written: list[Any], as_json: bool, **extra: Any) -> None:
    if as_json:
        print_json({"report": str(written[0]), "files": [str(p) for p in written], **extra})
        return
    more = f" (and {len(written) - 1} chart files beside it)" if len(written) > 1 else ""
    print(f"wrote the report to {safe_text(str(written[0]))}{more}")


def run_report(args: Any) -> int:
    from dsv4tui.core.campaign import charts, report

    charts.require()  # the one-line install hint (exit 2) before anything is read
    with RunStore() as store:
        distinct_runs(store, args.runs, "report")
        rep = report.build(store, args.runs, args.baseline)
    path, fmt = report_paths(args.out, args.format,
                             report.runs_stem([f.run.id for f in rep.facts]))
    written = report.write(rep, path, fmt, args.theme)
    for note in rep.notes:
        print(f"note: {note}", file=sys.stderr)
    print_written(written, args.json, runs=[f.run.id for f in rep.facts])
    return 0


def run_export(args: Any) -> int:
    if args.json and args.format not in (None, "json"):
        raise UserError(f"runs export: --json and --format {args.format} disagree", EXIT_CONFIG)
    fmt = args.format or "json"
    if args.all:
        if args.run:
            raise UserError("runs export: give an ID or --all, not both", EXIT_CONFIG)
        if fmt != "json":
            raise UserError("runs export --all writes JSON (one run: --format "
                            "csv|md|bench-serving)", EXIT_CONFIG)
        with RunStore() as store:
            text = export.run_json(export.all_runs(store))
    elif fmt == "bench-serving":
        if not args.run:
            raise UserError("runs export: give a run ID", EXIT_CONFIG)
        from dsv4tui.core.campaign import bench_serving

        with RunStore() as store:
            text = bench_serving.export_run(store, store.find_run(args.run))
    else:
        if not args.run:
            raise UserError("runs export: give a run ID (or --all)", EXIT_CONFIG)
        with RunStore() as store:
            detail = run_detail(store, store.find_run(args.run), with_requests=True)
        text = {"json": export.run_json, "csv": export.run_csv,
                "md": export.run_markdown}[fmt](detail)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}", EXIT_CONFIG) from None
        print(f"wrote {safe_text(args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run_import(args: Any) -> int:
    from dsv4tui.core.campaign.labels import check_label
    from dsv4tui.core.imports import import_file

    label = check_label(args.label) if args.label else None
    with RunStore() as store:
        got = import_file(store, args.file, label, simulated=args.simulated)
        run = store.run(got.run_id)
    assert run is not None
    tool = got.tool + (f" {got.version}" if got.version else "")
    if args.json:
        print_json({"run_id": got.run_id, "label": run.label, "levels": got.levels,
                    "requests": got.requests, "source": got.tool, "tool": got.tool,
                    "version": got.version, "file": args.file, "notes": got.notes})
    else:
        print(f"imported run {got.run_id} ({safe_text(run.label)}): {got.levels} level(s)"
              f"{f', {got.requests} requests' if got.requests else ''} from "
              f"{safe_text(args.file)}, {safe_text(tool)} definitions "
              f"(compare: dsv4tui runs compare ID {got.run_id})")
        for note in got.notes:
            print(f"note: {safe_text(note)}", file=sys.stderr)
    return 0


def run_delete(args: Any) -> int:
    from dsv4tui.core.store import kernels as kernel_store

    with RunStore() as store:
        store.require_writable()
        run = store.find_run(args.run)
        levels = len(store.levels(run.id))
        requests = len(store.requests(run.id))
        sanity = len(store.sanity_results(run_id=run.id))
        kernels = len(kernel_store.captures(store, run_id=run.id))
        what = (f"run {run.id} ({safe_text(run.label)}, {run.status}, "
                f"{_when(run.started_at)}): {levels} level(s), {requests} request(s), "
                f"{sanity} sanity result(s)")
        if kernels:
            what += f"; {kernels} kernel capture(s) stay, unlinked"
        if not args.yes:
            if not (sys.stdin.isatty() and sys.stdout.isatty()):
                raise UserError(f"runs delete: not deleting {what} without --yes (no terminal "
                                "to ask)", EXIT_CONFIG)
            if not ask(f"delete {what}? [y/N] "):
                print("nothing deleted")
                return 1
        store.delete_run(run.id)
    if args.json:
        print_json({"deleted": run.id, "label": run.label, "levels": levels,
                    "requests": requests, "sanity_results": sanity,
                    "kernel_captures_unlinked": kernels})
    else:
        print(f"deleted {what}")
    return 0
