"""``dsv4tui sanity (HOST [--profile P] | --url URL) [--json]``: exit 0 pass, 1 fail."""

from __future__ import annotations

import sys
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core.bench_runner import BenchRunner, SanityOutcome, open_bench
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.core.store import RunStore


def add_target_args(p: Any) -> None:
    """HOST | --url URL, shared by sanity and sweep."""
    p.add_argument("host", nargs="?", help="host name (its profile's server); or use --url")
    p.add_argument("--url", help="any OpenAI-compatible server; the agent runs on this machine")
    p.add_argument("--profile", help="server profile on HOST (default: the host's default)")
    p.add_argument("--model", help="model name to send (default: the profile's, or discovered)")
    p.add_argument("--api-key-env", help="env var (on the host) holding the API key")
    p.add_argument("--transport", choices=("raw",), default="raw",
                   help="the agent's HTTP client (default raw; see docs/metrics.md)")


def check_target(args: Any) -> None:
    if bool(args.host) == bool(args.url):
        raise UserError(f"{args.command}: give a HOST or --url URL (one of them)", EXIT_CONFIG)
    if args.url and args.profile:
        raise UserError(f"{args.command}: --profile goes with a HOST, not --url", EXIT_CONFIG)


def register(sub: Any) -> None:
    p = sub.add_parser("sanity")
    add_target_args(p)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default 120)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run)


def print_sanity(outcome: SanityOutcome, stream: Any = None) -> None:
    stream = stream or sys.stdout
    for case in outcome.cases:
        mark = "PASS" if case.get("passed") else "FAIL"
        answer = (case.get("answer") or "").strip().replace("\n", " ")
        if len(answer) > 60:
            answer = answer[:57] + "..."
        why = f"  ({case.get('error_kind')}: {case.get('error')})" if case.get("error_kind") else ""
        print(f"{mark}  {case.get('name')}: {answer!r} in {case.get('latency_s') or 0:.2f} s{why}",
              file=stream)
    if outcome.error:
        msg = str(outcome.error)
        if not msg.startswith("sanity could not run"):
            msg = f"sanity could not run: {msg}"
        print(msg, file=stream)
    else:
        ok = sum(1 for c in outcome.cases if c.get("passed"))
        state = "passed" if outcome.passed else "FAILED"
        print(f"sanity {state} ({ok}/{len(outcome.cases)})", file=stream)


def run(args: Any) -> int:
    check_target(args)
    settings, _ = load_settings(args)
    cases = settings.sanity.suite()
    if not cases:
        raise UserError("sanity: no cases (the config turned off the default and added none)",
                        EXIT_CONFIG)

    async def go() -> SanityOutcome:
        with RunStore() as store:
            async with open_bench(settings, host=args.host, url=args.url, profile=args.profile,
                                  model=args.model, api_key_env=args.api_key_env,
                                  transport=args.transport) as bench:
                if bench.notice:
                    print(f"note: {bench.notice}", file=sys.stderr)
                runner = BenchRunner(bench.agent, store)
                return await runner.sanity(bench.target, cases, host=bench.meta.host,
                                           timeout_s=args.timeout)

    outcome = run_async(go())
    if args.json:
        print_json(outcome.to_json())
    else:
        print_sanity(outcome)
    return 0 if outcome.passed else outcome.exit_code
