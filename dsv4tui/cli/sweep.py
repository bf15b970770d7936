"""``dsv4tui sweep (HOST | --url URL) --label L [--levels 1:8,8:32,16:48] ... [--json]``."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from pydantic import ValidationError

from dsv4tui.agent import events as ev_t
from dsv4tui.agent.bench.stats import level_json
from dsv4tui.cli.output import print_json
from dsv4tui.cli.sanity import add_target_args, check_target, print_sanity
from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.load_text import parse_goodput, parse_levels, parse_rates
from dsv4tui.core.campaign.sweep import SweepOutcome, SweepWatch
from dsv4tui.core.config import SweepPlan
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import (
    EXIT_CONFIG,
    EXIT_CONNECT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    UserError,
)
from dsv4tui.core.store import RunStore
from dsv4tui.core.text_table import table


def register(sub: Any) -> None:
    p = sub.add_parser("sweep")
    add_target_args(p)
    p.add_argument("--label", required=True, help="the run's name, e.g. nvfp4-marlin")
    p.add_argument("--levels", help="C:n,C:n,... closed-loop levels (default from the config: "
                   "1:8,8:32,16:48; with --rates alone: none)")
    p.add_argument("--rates", help="rate:n,... open-loop levels after the C levels, e.g. "
                   "2:100,4:200 (requests/s : requests)")
    p.add_argument("--arrival", choices=("poisson", "constant"),
                   help="rate levels' arrivals (default poisson, as bench_serving)")
    p.add_argument("--max-concurrency", type=int, help="at most this many requests of a rate "
                   "level in flight")
    p.add_argument("--input-len", type=int, help="prompt length in tokens (approximate)")
    p.add_argument("--output-len", type=int, help="output tokens per request (ignore_eos)")
    p.add_argument("--random-range-ratio", type=float, metavar="R", help="input and output "
                   "lengths uniform in [L*R, L] (bench_serving's); 1 = fixed (default)")
    p.add_argument("--dataset", metavar="FILE", help="prompts from this file (ShareGPT JSON, "
                   "or JSON lines of {\"prompt\": ..., \"output_len\": N}); shipped with the plan")
    p.add_argument("--warmup", type=int, help="uncounted warm-up requests per level")
    p.add_argument("--seed", type=int, help="prompt and arrival seed, stored with the run "
                   "(default: random)")
    p.add_argument("--goodput", metavar="TARGETS", help="ttft:MS,tpot:MS,e2el:MS (any of them): "
                   "share and rate of requests meeting every target, per level")
    p.add_argument("--stop-when-saturated", action="store_true",
                   help="stop after two levels in a row in which the server did not keep up")
    p.add_argument("--workers", type=int, help="load generator processes per level on the host "
                   "(default: from the level and the host's cores)")
    p.add_argument("--no-ignore-eos", action="store_true",
                   help="do not send ignore_eos (servers that reject it, e.g. transformers serve)")
    p.add_argument("--repeats", type=int, default=1, metavar="K",
                   help="the sweep K times, a run each (on the same server: a campaign's "
                        "repeats restart it); prints the run-to-run spread per C")
    p.add_argument("--no-sanity", action="store_true", help="skip the sanity gate")
    p.add_argument("--yes", "-y", action="store_true", help="run a plan estimated to take "
                   "over an hour or over 2 GB of load-generator memory (else refused)")
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    p.set_defaults(func=run)


def _parsed(flag: str, parse: Any, text: str) -> Any:
    """The core's parser (campaign/load_text, the plan dialog's too), its error as the flag's."""
    try:
        value = parse(text)
    except ValueError as exc:
        raise UserError(f"{flag}: {exc}", EXIT_CONFIG) from None
    if not value:
        raise UserError(f"{flag}: nothing given (e.g. {EXAMPLES[flag]})", EXIT_CONFIG)
    return value


EXAMPLES = {"--levels": "1:8,8:32,16:48", "--rates": "2:100,4:200",
            "--goodput": "ttft:500,tpot:50"}


def build_plan(base: SweepPlan, args: Any) -> SweepPlan:
    data = base.model_dump()
    if getattr(args, "levels", None):
        data["levels"] = _parsed("--levels", parse_levels, args.levels)
    if getattr(args, "rates", None):
        data["rates"] = _parsed("--rates", parse_rates, args.rates)
        if not getattr(args, "levels", None):
            data["levels"] = []  # --rates alone: only the rate levels
    for key in ("input_len", "output_len", "warmup", "arrival", "max_concurrency",
                "random_range_ratio", "seed", "workers", "dataset"):
        if getattr(args, key, None) is not None:
            data[key] = getattr(args, key)
    if getattr(args, "goodput", None):
        data["goodput"] = _parsed("--goodput", parse_goodput, args.goodput)
    if getattr(args, "stop_when_saturated", False):
        data["stop_when_saturated"] = True
    if getattr(args, "no_ignore_eos", False):
        data["ignore_eos"] = False
    try:
        plan = SweepPlan.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"sweep: {where + ': ' if where else ''}"
                        f"{err['msg'].removeprefix('Value error, ')}", EXIT_CONFIG) from None
    if getattr(args, "output_len", None) is not None and plan.dataset_prompts:
        # --output-len given: it wins over the lengths the file set (a ShareGPT answer's, a
        # line's output_len), as bench_serving's --sharegpt-output-len
        from dsv4tui.agent.bench.datasets import without_lengths

        plan = plan.model_copy(update={"dataset_prompts": without_lengths(
            [tuple(e) for e in plan.dataset_prompts])})  # type: ignore[misc]
    return plan


class Progress(reducer.Reader):
    """One live line per level on stderr (rewritten in place on a terminal)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.current: dict[str, Any] | None = None  # the level in progress
        self.done = self.errors = 0
        self.store_busy = False

    def note(self, text: str) -> None:
        if self.current is not None and self.tty:
            print("", file=self.stream)
        print(text, file=self.stream, flush=True)

    def __call__(self, ev: dict[str, Any]) -> None:
        reducer.fold(self, ev)

    def store_waiting(self, ev: reducer.StoreWaiting) -> None:
        if ev.get("waited_s", 0) >= 2 and not self.store_busy:
            self.store_busy = True
            self.note(f"note: the run store is busy ({ev.get('error')}); waiting, "
                      f"{ev.get('pending')} events queued (the host's journal keeps them)")

    def store_ok(self, ev: reducer.StoreWaiting) -> None:
        if self.store_busy:
            self.store_busy = False
            self.note(f"note: the run store is writable again after {ev.get('waited_s')} s; "
                      "nothing was lost")

    def ingest_error(self, ev: reducer.IngestError) -> None:
        self.note(f"warning: journal event {ev.get('seq')} ({ev.get('event_type')}) could not "
                  f"be stored: {ev.get('error')}")

    def notice(self, ev: ev_t.NoticeEvent) -> None:
        self.note(f"note: {ev.get('message')}")

    def level_prep(self, ev: ev_t.LevelPrepEvent) -> None:
        """Before the level's first request: its prompts, its warm-up."""
        text = str(ev.get("message") or "")
        if self.tty:
            print("\r" + text + "\033[K", end="", file=self.stream, flush=True)
        elif ev.get("announce"):
            print(text, file=self.stream, flush=True)

    def level_start(self, ev: ev_t.LevelStartEvent) -> None:
        self.current, self.done, self.errors = dict(ev), 0, 0
        self._line()

    def request(self, ev: ev_t.RequestEvent) -> None:
        if self.current is not None:
            self.done += 1
            self.errors += not ev.get("ok")
            self._line()

    def level(self, ev: ev_t.LevelEvent) -> None:
        tok_s = ev.get("output_tok_s")
        ttft = (ev.get("ttft_ms") or {}).get("p50")
        tail = f"  {tok_s:.1f} tok/s" if tok_s is not None else ""
        good = ev.get("goodput") or {}
        tail += f"  goodput {100 * good['share']:.0f}%" if good.get("share") is not None else ""
        tail += f"  TTFT p50 {ttft:.0f} ms" if ttft is not None else ""
        if (ev.get("saturation") or {}).get("saturated"):
            tail += "  saturated"
        status = ev.get("status") or ("partial" if ev.get("partial") else "done")
        tail += f"  ({status})" if status != "done" else ""
        self._line(final=tail)
        self.current = None

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> None:
        mark = "ok" if ev.get("passed") else "FAILED"
        print(f"sanity {ev.get('name')}: {mark} ({(ev.get('answer') or '').strip()[:40]!r})",
              file=self.stream, flush=True)

    def _line(self, final: str | None = None) -> None:
        if self.current is None:
            return
        n = self.current.get("requests")
        name = self.current.get("name") or f"C={self.current.get('concurrency')}"
        text = f"{name:<6} {self.done}/{n} done, {self.errors} errors"
        if final is not None:
            print(("\r" if self.tty else "") + text + final + ("\033[K" if self.tty else ""),
                  file=self.stream, flush=True)
        elif self.tty:
            print("\r" + text + "\033[K", end="", file=self.stream, flush=True)


def _cell(v: Any, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _goodput_cell(lv: dict[str, Any]) -> str:
    good = lv.get("goodput") if isinstance(lv.get("goodput"), dict) else None
    if not good or good.get("share") is None:
        return "-"
    rate = good.get("rate")
    return f"{100 * good['share']:.0f}%" + (f" {rate:.2f}/s" if rate is not None else "")


def level_table(levels: list[dict[str, Any]]) -> str:
    """The per-level table (``sweep``, ``runs show``): C (or the rate), n, ok, err, tok/s,
    goodput next to it when targets were set, the latency columns, the duration, where the
    token counts came from, and the status (busy, short outputs, saturated)."""
    from dsv4tui.core.campaign.columns import LEVEL_COLUMNS, SERVER_NOTE

    rates = any(lv.get("rate") is not None for lv in levels)
    goodput = any(isinstance(lv.get("goodput"), dict) for lv in levels)
    first, rest = LEVEL_COLUMNS[0], LEVEL_COLUMNS[1:]
    rows = []
    for lv in levels:
        j = level_json(lv)
        status = lv.get("status") or ("partial" if lv.get("partial") else "done")
        if lv.get("busy"):
            status += " (busy)"
        if lv.get("short_outputs"):
            status += f" ({lv['short_outputs']} short)"
        if (lv.get("saturation") or {}).get("saturated"):
            status += " (saturated)"
        rate = lv.get("rate")
        conc = j["concurrency"]
        row = [str(conc) if conc or rate is None else "-"]
        if rates:
            row.append("-" if rate is None else f"{rate:g}")
        row += [str(j["requests"]), _cell(j["completed"], "{}"), _cell(j["errors"], "{}"),
                first.cell(lv)]
        if goodput:
            row.append(_goodput_cell(lv))
        row += [c.cell(lv) for c in rest]
        if rates:  # how late the client sent against the timeline: an overloaded client shows
            lag = (lv.get("send_lag_ms") or {}).get("p99")
            row.append(_cell(lag))
        row += [_cell(j["duration_s"]), j["token_count_source"] or "-", status]
        rows.append(row)
    headers = ["C", *(["rate/s"] if rates else []), "n", "ok", "err", first.header,
               *(["goodput"] if goodput else []), *(c.header for c in rest),
               *(["lag p99 ms"] if rates else []), "dur s", "tokens", "status"]
    out = table(rows, headers)
    if any(isinstance(lv.get("server"), dict) for lv in levels):
        out += "\n" + SERVER_NOTE
    return out


async def sweep_on_host(settings: Any, args: Any, plan: SweepPlan, cases: Any,
                        watch: SweepWatch, say: Any) -> SweepOutcome:
    """Start the sweep as a one-variant campaign on the host and collect it to its end,
    reconnecting when the link drops; Ctrl-C cancels it on the host."""
    from dsv4tui.core.bench_runner import find_target, gpu_names, slurm_target
    from dsv4tui.core.campaign import session
    from dsv4tui.core.campaign.plan import bench_target, sweep_spec
    from dsv4tui.core.config import LOCAL
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.core.hosts.supervisor import HostSupervisor

    name = args.host or LOCAL
    sup = HostSupervisor(host_spec(name, settings))
    try:
        host = await sup.wait_connected()
        job: dict[str, Any] | None = None  # a Slurm host: its job (node 0's URL, launch id)
        tspec: dict[str, Any]
        if not args.url and host.config.slurm is not None:
            tspec, job = await slurm_target(host, args.profile, args.model, args.api_key_env)
        elif args.url:
            tspec = {"mode": "url", "url": args.url, "model": args.model,
                                     "api_key_env": args.api_key_env}
        else:
            tspec = bench_target(host.config, args.profile)
            tspec.update({k: v for k, v in (("model", args.model),
                                            ("api_key_env", args.api_key_env)) if v})
        if args.url:  # nothing answers there: nothing to measure, nothing to store
            await _check_reachable(host, args.url, min(plan.stall_timeout_s, REACH_ANSWER_S))
        with RunStore() as store:
            # which server, decided on the host now: a clear error before anything starts
            _, meta, notice = await find_target(host.agent, tspec, host=host.name,
                                                simulated=host.simulated, store=store)
            if notice:
                say(f"note: {notice}")
            names = await gpu_names(host.agent) if args.host and job is None else []
            spec = sweep_spec(label=args.label, plan=plan, cases=cases, target=tspec,
                              host=host.name, repeats=getattr(args, "repeats", 1) or 1)
            started = await session.start(host, spec, store)
            cid = watch.campaign_id = str(started["id"])
            what = (f"measuring {meta.backend or 'unknown'} / {meta.checkpoint or 'unknown'} "
                    f"(from the {meta.source.replace('_', ' ')})"
                    if meta.source != "unknown" else
                    "what the server runs is unknown (no launch record, no /server_info)")
            say(f"sweep {args.label!r} runs on {host.name} (campaign {cid}); {what}"
                + ("; the server is SIMULATED" if meta.simulated else "")
                + (f"; Slurm job {job['job_id']}, node 0 at {job['url']}" if job else ""))
            try:
                await session.follow_to_end(
                    sup.wait_connected, store, cid, on_event=watch, gpu_names=names,
                    on_link=lambda why: say(f"link lost ({why}); the sweep goes on on "
                                            f"{host.name}; reconnecting ..."))
                if job is not None:  # its runs measured the job's launch (its job id)
                    for row in store.query("SELECT id FROM runs WHERE campaign_id = ?", (cid,)):
                        store.update_run(int(row["id"]), launch_id=job["launch_id"])
            except asyncio.CancelledError:  # Ctrl-C: stop it on the host, keep what finished
                say("cancelling the sweep on the host ...")
                with contextlib.suppress(UserError, OSError):
                    await asyncio.wait_for(session.cancel(await asyncio.wait_for(
                        sup.wait_connected(), 15), store, cid), 90)
                raise
    finally:
        await sup.stop()
    return watch.outcome()


# How long a --url that accepted the connection has to answer the reach check's GET: the
# sweep's stall timeout (each of its requests would stall after that), at most the 10 s the
# agent's own GETs (model discovery, /server_info) wait for an answer.
REACH_ANSWER_S = 10.0


async def _check_reachable(host: Any, url: str, answer_timeout_s: float) -> None:
    """A ``--url`` that does not answer HTTP from the host (no connection opens, or the
    server accepts it and says nothing within ``answer_timeout_s``): one line, exit 4, before
    a run is stored (nothing would be measured; the host's agent says why). Any HTTP answer,
    even a 500, passes: that server's sweep measures its errors."""
    events = await host.agent.call("bench", "reach", "--url", url, "--answer-timeout",
                                   f"{answer_timeout_s:g}", timeout=30.0 + answer_timeout_s)
    got = next((e for e in events if e.get("type") == "reach"), None)
    if got is not None and not got.get("reachable"):
        raise UserError(f"sweep: {got.get('error') or 'cannot connect to ' + url} (from "
                        f"{host.name}); nothing was measured, no run stored", EXIT_CONNECT)


def check_size(plan: SweepPlan, yes: bool) -> None:
    """A plan estimated over an hour or over 2 GB of the host's memory (the core's
    ``plan_estimate``, the Bench dialog's too) runs only with ``--yes``: one line, exit 2, nothing
    started."""
    from dsv4tui.core.campaign.sweep import plan_estimate

    est = plan_estimate(plan)
    if est["confirm"] and not yes:
        raise UserError(f"sweep: this plan is {' and '.join(est['confirm'])}: "
                        f"{est['text']}; pass --yes to run it", EXIT_CONFIG)


def run(args: Any) -> int:
    from dsv4tui.core.campaign.labels import check_label

    check_target(args)
    args.label = check_label(args.label)
    if not 1 <= args.repeats <= 100:
        raise UserError(f"sweep: --repeats must be 1..100, not {args.repeats}", EXIT_CONFIG)
    settings, _ = load_settings(args)
    plan = build_plan(settings.sweep, args)
    check_size(plan, args.yes)
    cases = None if args.no_sanity else (settings.sanity.suite() or None)
    progress = Progress()
    watch = SweepWatch(args.label, sanity=cases is not None, then=progress)

    def say(text: str) -> None:
        progress.note(text)

    try:
        outcome = run_async(sweep_on_host(settings, args, plan, cases, watch, say))
    except UserError as exc:
        if exc.exit_code == EXIT_INTERRUPTED:
            cid = watch.campaign_id
            print("sweep cancelled; finished requests are stored" + (
                f" (campaign {cid})" if cid else ""), file=sys.stderr)
        raise
    if args.json:
        print_json(outcome.to_json())
    else:
        if outcome.sanity is not None and not outcome.sanity.passed:
            print_sanity(outcome.sanity)
        if outcome.levels:
            print(level_table(outcome.levels))
        errors = outcome.errors_by_kind()
        if len(watch.run_ids) > 1:
            for line in repeat_spread_lines(watch.run_ids):
                print(line)
        print(f"run {outcome.run_id} ({outcome.label}): {outcome.status}"
              + (f": {outcome.error}" if outcome.error else "")
              + (f" [errors: {', '.join(f'{k} {n}' for k, n in sorted(errors.items()))}]"
                 if errors else ""))
    if outcome.status != "done":
        if args.json and outcome.error:
            print(f"dsv4tui: sweep {outcome.status}: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def repeat_spread_lines(run_ids: list[int]) -> list[str]:
    """``sweep --repeats``: each C's output tok/s over the repeats and their spread."""
    from dsv4tui.core.campaign.verdict import spread_pct

    by_c: dict[int, list[float]] = {}
    with RunStore() as store:
        for rid in run_ids:
            for lv in store.levels(rid):
                if not lv.stats.get("rate") and lv.output_tok_s:
                    by_c.setdefault(lv.concurrency, []).append(lv.output_tok_s)
    lines = [f"repeats: runs {', '.join(f'#{i}' for i in run_ids)} (the same server process; "
             "a campaign's repeats restart it, which is where most run-to-run spread comes "
             "from)"]
    for c, vals in sorted(by_c.items()):
        s = spread_pct(vals)
        lines.append(f"  C={c}: " + ", ".join(f"{v:.1f}" for v in vals) + " tok/s"
                     + (f"; spread (sd of log) {s:.1f} %" if s is not None else ""))
    return lines
