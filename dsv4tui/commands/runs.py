"""``dsv4tui runs list|show ID|compare ID ID ...|export ID [--format json|csv|md]|delete ID``."""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from typing import Any

from dsv4tui.commands.output import print_json, table
from dsv4tui.commands.sweep import level_table
from dsv4tui.errors import EXIT_CONFIG, UserError
from dsv4tui.store import Level, Run, RunStore, compare_runs

REQUEST_CSV = ("level", "concurrency", "index", "ok", "start_s", "ttft_s", "ttfat_s", "e2e_s",
               "tpot_s", "output_tokens", "prompt_tokens", "token_source", "chunks",
               "finish_reason", "status", "error_kind", "error")


def register(sub: Any) -> None:
    p = sub.add_parser("runs", help="list, show, compare, export and delete saved runs")
    rsub = p.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    q = rsub.add_parser("list", help="saved runs, newest first")
    q.add_argument("--host", help="only runs on this host")
    q.add_argument("--limit", type=int, default=50)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_list)
    q = rsub.add_parser("show", help="one run: its levels, GPU summaries and sanity")
    q.add_argument("run", metavar="ID", help="run id (or label: the newest with it)")
    q.add_argument("--requests", action="store_true", help="with --json: every request too")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_show)
    q = rsub.add_parser("compare", help="output tok/s and TTFT per C, change against the first")
    q.add_argument("runs", metavar="ID", nargs="+")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_compare)
    q = rsub.add_parser("export", help="a run as JSON (everything), CSV (requests) or Markdown")
    q.add_argument("run", metavar="ID")
    q.add_argument("--format", choices=("json", "csv", "md"), default="json")
    q.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    q.set_defaults(func=run_export)
    q = rsub.add_parser("delete", help="delete a run and everything measured in it")
    q.add_argument("run", metavar="ID")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_delete)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _num(v: Any, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


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
             _when(r.started_at), r.status + (" SIM" if r.simulated else ""), _num(r.best_tok_s),
             {True: "pass", False: "FAIL", None: "-"}[r.sanity_passed]] for r in runs]
    print(table(rows, ["ID", "label", "target", "backend", "checkpoint", "started", "status",
                       "best tok/s", "sanity"]))
    return 0


def run_detail(store: RunStore, run: Run, with_requests: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"run": run.to_dict(),
                           "levels": [lv.to_dict() for lv in store.levels(run.id)],
                           "sanity": store.sanity_results(run_id=run.id)}
    if with_requests:
        out["requests"] = store.requests(run.id)
    return out


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
    return table(rows, ["C", "GPUs", "util %", "tensor %", "SM %", "DRAM %", "power W",
                        "tok/s/kW"])


def run_show(args: Any) -> int:
    with RunStore() as store:
        run = store.find_run(args.run)
        detail = run_detail(store, run, args.requests)
        levels = store.levels(run.id)
    if args.json:
        print_json(detail)
        return 0
    print(f"run {run.id}: {run.label}  [{run.status}{' SIMULATED' if run.simulated else ''}]")
    print(f"  target   {run.target}  model {run.model or '-'}  server {run.server_version or '-'}")
    print(f"  profile  {run.profile_name or '-'}  backend {run.backend or '-'}  checkpoint "
          f"{run.checkpoint or '-'}  launch {run.launch_id or '-'}")
    if run.gpu_names:
        print(f"  GPUs     {len(run.gpu_names)} x {run.gpu_names[0]}")
    print(f"  started  {_when(run.started_at)}  finished {_when(run.finished_at)}")
    if run.error:
        print(f"  note     {run.error}")
    if levels:
        print()
        print(level_table([lv.to_dict() for lv in levels]))
        gpu = _gpu_table(levels)
        if gpu:
            print()
            print(gpu)
    for case in detail["sanity"]:
        mark = "PASS" if case["passed"] else "FAIL"
        print(f"  sanity {mark} {case['name']}: {(case['answer'] or '').strip()[:60]!r}")
    return 0


def run_compare(args: Any) -> int:
    with RunStore() as store:
        data = compare_runs(store, args.runs)
    if args.json:
        print_json(data)
        return 0
    runs = data["runs"]
    print("  ".join(f"#{r['id']} = {r['label']} ({r['target']}, {r['backend'] or '-'}/"
                    f"{r['checkpoint'] or '-'})" for r in runs))
    power = any(cell["tok_s_per_kw"] is not None for row in data["rows"] for cell in row["runs"])
    headers = ["C"]
    for i, r in enumerate(runs):
        headers += [f"#{r['id']} tok/s", f"#{r['id']} TTFT ms"]
        if i:
            headers[-2:] = [headers[-2], "vs #1", headers[-1], "vs #1"]
        if power:
            headers += [f"#{r['id']} tok/s/kW"]
    rows = []
    for row in data["rows"]:
        cells = [str(row["concurrency"])]
        for i, cell in enumerate(row["runs"]):
            tok, ttft = _num(cell["output_tok_s"]), _num(cell["ttft_ms"], "{:.0f}")
            if i:
                cells += [tok, _num(cell["output_tok_s_pct"], "{:+.1f}%"), ttft,
                          _num(cell["ttft_ms_pct"], "{:+.1f}%")]
            else:
                cells += [tok, ttft]
            if power:
                cells.append(_num(cell["tok_s_per_kw"]))
        rows.append(cells)
    print(table(rows, headers))
    return 0


def _markdown(detail: dict[str, Any]) -> str:
    run = detail["run"]
    lines = [f"## Run {run['id']}: {run['label']}", "",
             f"target {run['url'] or run['host']}, model {run['model'] or '-'}, backend "
             f"{run['backend'] or '-'}, checkpoint {run['checkpoint'] or '-'}, status "
             f"{run['status']}", "",
             "| C | n | ok | err | tok/s | req tok/s | TTFT ms | TTFT p99 | TPOT ms | ITL ms | "
             "E2E ms | tokens |", "|" + "---|" * 12]
    for lv in detail["levels"]:
        def g(key: str, sub: str = "mean", fmt: str = "{:.1f}", lv: dict = lv) -> str:
            return _num((lv.get(key) or {}).get(sub), fmt)
        lines.append(f"| {lv['concurrency']} | {lv['requests']} | {lv.get('completed')} | "
                     f"{lv.get('errors')} | {_num(lv.get('output_tok_s'))} | "
                     f"{_num(lv.get('per_request_tok_s_mean'))} | {g('ttft_ms', fmt='{:.0f}')} | "
                     f"{g('ttft_ms', 'p99', '{:.0f}')} | {g('tpot_ms')} | {g('itl_ms')} | "
                     f"{g('e2e_ms', fmt='{:.0f}')} | {lv.get('token_count_source') or '-'} |")
    return "\n".join(lines) + "\n"


def _csv(detail: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=REQUEST_CSV, extrasaction="ignore")
    writer.writeheader()
    conc = {lv["level"]: lv["concurrency"] for lv in detail["levels"]}
    for req in detail["requests"]:
        writer.writerow({**req, "concurrency": conc.get(req["level"])})
    return buf.getvalue()


def run_export(args: Any) -> int:
    with RunStore() as store:
        detail = run_detail(store, store.find_run(args.run), with_requests=True)
    if args.format == "json":
        text = json.dumps(detail, indent=2, default=str) + "\n"
    elif args.format == "csv":
        text = _csv(detail)
    else:
        text = _markdown(detail)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}", EXIT_CONFIG) from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run_delete(args: Any) -> int:
    with RunStore() as store:
        run = store.find_run(args.run)
        store.delete_run(run.id)
    if args.json:
        print_json({"deleted": run.id, "label": run.label})
    else:
        print(f"deleted run {run.id} ({run.label})")
    return 0
