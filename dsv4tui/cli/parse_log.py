"""CLI: ``dsv4tui parse-log FILE [--json]``: offline parse of an SGLang server log.

JSON: state (crashed | failed | stopped | ready | starting), ready, startup_s, crash ({kind,
line, text, after_ready_s} or null), phases [{name, duration_s}], errors [{kind, line, text}],
decode [{time, running_req, queue_req, gen_throughput, ...}], prefill [...], plus http, limits,
stop. Exit 1 when the log shows the server crashed (after ready) or failed (before), else 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsv4tui.agent.host.logparse import summarize_text
from dsv4tui.cli.output import print_json
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_FAILED, UserError


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


# A log alone does not say when its server was launched: its startup is the log's own span
# (a launch's startup, launch -> ready on the host's clock, is longer by python's start).
LOG_STARTUP = "(log timestamps: first line -> ready)"


def headline(path: Path, s: dict[str, Any]) -> list[str]:
    """What the log says happened, first: a crash after ready is the news, not "ready"."""
    crash = s.get("crash")
    if crash is not None:
        when = (f", {_fmt(crash['after_ready_s'])} after ready"
                if crash.get("after_ready_s") is not None else "")
        return [f"{path}: CRASHED after ready (line {crash['line']}{when}): "
                f"{crash['kind']}: {crash['text'][:200]}",
                f"  it had become ready: startup {_fmt(s['startup_s'])} {LOG_STARTUP}"]
    if s["state"] == "failed":
        return [f"{path}: FAILED before ready (last phase: {s['phase']})"]
    if s["ready"]:
        stopped = ", then stopped (SIGTERM)" if s["state"] == "stopped" else ""
        return [f"{path}: ready, startup {_fmt(s['startup_s'])} {LOG_STARTUP}{stopped}"]
    return [f"{path}: not ready (last phase: {s['phase']})"]


def report(path: Path, s: dict[str, Any]) -> str:
    out = headline(path, s)
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
    return EXIT_FAILED if summary["state"] in ("crashed", "failed") else 0
