"""CLI: ``dsv4tui parse-log FILE [--json]``: offline parse of an SGLang server log.

JSON: ready, startup_s, phases [{name, duration_s}], errors [{kind, line, text}], decode
[{time, running_req, queue_req, gen_throughput, ...}], prefill [...], plus http, limits, stop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsv4tui.agent.logparse import summarize_text
from dsv4tui.cli.output import print_json
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.errors import EXIT_CONFIG, UserError


def register(sub: Any) -> None:
    p = sub.add_parser("parse-log")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_run)


def read_log(path: Path) -> str:
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a log file", EXIT_CONFIG)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"log file not found: {path}", EXIT_CONFIG) from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}", EXIT_CONFIG) from None
    if b"\x00" in data[:4096]:
        raise UserError(f"{path} looks binary, not an SGLang log", EXIT_CONFIG)
    return data.decode("utf-8", "replace")


def _fmt(x: float | None, unit: str = " s") -> str:
    return "?" if x is None else f"{x:.2f}{unit}"


def report(path: Path, s: dict[str, Any]) -> str:
    out = [f"{path}: " + (f"ready, startup {_fmt(s['startup_s'])}" if s["ready"] else
                          f"not ready (last phase: {s['phase']})")]
    if s["phases"]:
        out.append("phases:")
        for ph in s["phases"]:
            stages = ", ".join(f"{st['stage']} {_fmt(st['duration_s'])}"
                               for st in ph.get("stages", []))
            out.append(f"  {ph['name']:<13}{_fmt(ph['duration_s']):>10}"
                       + (f"   ({stages})" if stages else ""))
    out.append(f"errors: {len(s['errors'])}" if s["errors"] else "errors: none")
    for e in s["errors"][:20]:
        out.append(f"  line {e['line']}: {e['kind']}: {e['text'][:200]}")
    if s["decode"]:
        tputs = [d["gen_throughput"] for d in s["decode"] if d["gen_throughput"] is not None]
        last = s["decode"][-1]
        mean = sum(tputs) / len(tputs) if tputs else None
        out.append(f"decode: {len(s['decode'])} lines; last {last['running_req']} running, "
                   f"{last['queue_req']} queued, {_fmt(last['gen_throughput'], ' tok/s')}; "
                   f"mean {_fmt(mean, ' tok/s')}")
    if s["prefill"]:
        out.append(f"prefill: {len(s['prefill'])} lines, "
                   f"{sum(p['new_token'] or 0 for p in s['prefill'])} new tokens")
    if s["stop"]:
        out.append("stop: " + ", ".join(e["kind"] for e in s["stop"]))
    return "\n".join(out)


def _run(args: Any) -> int:
    path = Path(args.file).expanduser()
    summary = summarize_text(read_log(path))
    if args.json:
        print_json(summary)
    else:
        # one report line per line: a log's text cannot add lines or drive the terminal
        print("\n".join(safe_text(line) for line in report(path, summary).split("\n")))
    return 0
