"""``dsv4tui campaign start|attach|status|list|cancel|resume|report``: campaigns the host runs by
itself (restart -> ready -> sanity -> sweep, per variant), collected into the run store.

``start NAME`` (``[campaigns.NAME]`` in the config, or ``--file F``) prints the campaign id and
attaches unless ``--detach``; ``attach`` returns when the campaign ends (a dropped link is
reconnected; Ctrl-C detaches, the campaign goes on). ``--dry-run`` prints each variant's exact
argv and the sweep plan without connecting.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.cli.output import print_json
from dsv4tui.core.campaign import plan as cplan
from dsv4tui.core.campaign import reducer, session, startup_phases, variant_kernels
from dsv4tui.core.campaign.compare import campaign_comparison, load_text
from dsv4tui.core.campaign.ingest import Collected
from dsv4tui.core.campaign.kernel_load import load_text as kernel_load_text
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.verdict import canary_lines, verdict_lines
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    NotFoundError,
    UserError,
)
from dsv4tui.core.server.startup import startup_text
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.core.text_table import table

ENDED_OK = ("done",)


def register(sub: Any) -> None:
    p = sub.add_parser("campaign")
    cmds = p.add_subparsers(dest="campaign_command", metavar="ACTION", required=True)
    s = cmds.add_parser("start", help="start a campaign on its host (then attach)")
    s.add_argument("name", nargs="?", help="[campaigns.NAME] in the config (or with --file)")
    s.add_argument("--file", "-f", help="a campaign TOML file")
    s.add_argument("--dry-run", action="store_true",
                   help="print each variant's argv and the sweep plan; connect to nothing")
    s.add_argument("--repeats", type=_repeats, metavar="K",
                   help="run each variant K times, each on a freshly restarted server "
                        "(overrides the campaign's repeats; 2 or more give verdicts)")
    s.add_argument("--order", choices=("interleaved", "blocked", "random"),
                   help="the order of the repeats (overrides the campaign's order)")
    s.add_argument("--detach", action="store_true", help="print the id and return")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_start)
    for name, help_ in (("attach", "collect a campaign into the store until it ends"),
                        ("status", "a campaign's state, variant by variant")):
        c = cmds.add_parser(name, help=help_)
        c.add_argument("host", metavar="HOST")
        c.add_argument("id", nargs="?", metavar="ID",
                       help="campaign id (default: the one running, else the newest)")
        c.add_argument("--json", action="store_true")
        c.set_defaults(func=_attach if name == "attach" else _status)
    c.add_argument("--baseline", metavar="VARIANT",
                   help="the variant the verdicts are against (default: the first)")
    ls = cmds.add_parser("list", help="the host's campaigns")
    ls.add_argument("host", metavar="HOST")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)
    c = cmds.add_parser("cancel", help="stop a running campaign (finished requests are kept)")
    c.add_argument("host", metavar="HOST")
    c.add_argument("id", metavar="ID")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cancel)
    rp = cmds.add_parser("report", help="write a campaign's report (its runs compared, "
                         "charts, launches, sanity, versions); also written when it ends")
    rp.add_argument("host", metavar="HOST")
    rp.add_argument("id", metavar="ID")
    rp.add_argument("--out", "-o", metavar="FILE",
                    help="where to write it (default: the data dir's reports folder)")
    rp.add_argument("--format", choices=("html", "md"), default=None,
                    help="html (default; .md in --out means md) or md")
    rp.add_argument("--theme", choices=("light", "dark"), default="light")
    rp.add_argument("--json", action="store_true", help="print what was written as JSON")
    rp.set_defaults(func=_report)
    r = cmds.add_parser("resume", help="run what an interrupted campaign did not finish")
    r.add_argument("host", metavar="HOST")
    r.add_argument("id", metavar="ID")
    r.add_argument("--detach", action="store_true")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=_resume)


# -- printing ---------------------------------------------------------------------------------

def _repeats(value: str) -> int:
    import argparse

    if not value.isdigit() or not 1 <= int(value) <= 100:
        raise argparse.ArgumentTypeError(f"--repeats must be a whole number 1..100, not {value!r}")
    return int(value)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Printer(reducer.Reader):
    """What a person watching ``campaign attach`` sees: one line per step."""

    def __init__(self, names: list[str] | None = None) -> None:
        self.names = names or []
        self.shown: list[str] = []  # error lines printed already (not repeated)
        self.store_busy = False

    def _name(self, vi: Any) -> str:
        i = int(vi or 0)
        return self.names[i] if i < len(self.names) else f"variant {i}"

    def __call__(self, ev: dict[str, Any]) -> None:
        reducer.fold(self, ev)

    def _step(self, ev: Any) -> str:
        return f"[{int(ev.get('variant') or 0) + 1}/{len(self.names) or '?'}]"

    def campaign_start(self, ev: ev_t.CampaignStartEvent) -> None:
        self.names = [str(v.get("name")) for v in ev.get("variants") or []]

    def campaign_resume(self, ev: ev_t.CampaignResumeEvent) -> None:
        _say(f"resumed (attempt {ev.get('attempt')})")

    def variant_start(self, ev: ev_t.VariantStartEvent) -> None:
        _say(f"{self._step(ev)} {ev.get('name')}"
             + (": restarting the server" if ev.get("restart") else ""))

    def launch_start(self, ev: ev_t.LaunchStartEvent) -> None:
        if ".r" not in str(ev.get("launch") or ""):
            return
        repeat = str(ev.get("launch")).split(".r")[1].split(".")[0]
        if repeat.isdigit() and int(repeat) > 0:
            _say(f"{self._step(ev)} {self._name(ev.get('variant'))}: repeat {int(repeat) + 1}, "
                 "restarting the server")

    def log_event(self, ev: ev_t.LogEvent) -> None:
        inner = ev.get("event") or {}
        if inner.get("kind") != "phase":
            return
        dur = inner.get("duration_s")
        _say(f"    {inner.get('name'):<13} {dur:7.2f} s" if dur is not None
             else f"    {inner.get('name')}")

    def launch_end(self, ev: ev_t.LaunchEndEvent) -> None:
        if ev.get("ok"):
            _say(f"    ready: {startup_text(ev.get('startup_s'))}, pid {ev.get('pid')}")
            return
        _say(f"    FAILED to start: {ev.get('error')}")
        self.shown = (ev.get("last_errors") or [])[-5:]
        for line in self.shown:
            _say(f"      | {line}")

    def launch_retry(self, ev: ev_t.LaunchRetryEvent) -> None:  # on_failure = "retry-suggested"
        move = ev.get("move") or {}
        _say(f"    cause: {ev.get('cause')}")
        _say(f"    retrying once with {move['flag']} {move['from']} -> {move['to']}"
             if move else "    no flag to change for this cause: not retried")

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> None:
        mark = "PASS" if ev.get("passed") else "FAIL"
        _say(f"    sanity {mark} {ev.get('name')}: {(ev.get('answer') or '').strip()[:40]!r}")

    def canary(self, ev: ev_t.CanaryEvent) -> None:
        _say(f"    canary {ev.get('correct')}/{ev.get('total')} correct "
             f"({100 * float(ev.get('share') or 0):.1f} %, {ev.get('source')})")

    def canary_gate(self, ev: ev_t.CanaryGateEvent) -> None:
        _say(f"    canary gate {'PASS' if ev.get('passed') else 'FAIL'}: {ev.get('text')}")

    def level(self, ev: ev_t.LevelEvent) -> None:
        tok = ev.get("output_tok_s")
        _say(f"    C={ev.get('concurrency'):<4} {ev.get('completed')}/{ev.get('requests')} "
             f"{ev.get('status') or ('partial' if ev.get('partial') else 'done')}"
             + (f"  {tok:.1f} tok/s" if tok is not None else ""))

    def run_end(self, ev: ev_t.RunEndEvent) -> None:
        if ev.get("status") != "done":
            _say(f"    run {ev.get('status')}: {ev.get('reason')}")

    def variant_end(self, ev: ev_t.VariantEndEvent) -> None:
        _say(f"    -> {ev.get('state')}" + (f": {ev.get('reason')}" if ev.get("reason")
                                              else ""))
        lines = (ev.get("error_lines") or [])[-5:]
        if lines != self.shown:
            for line in lines:
                _say(f"      | {line}")

    def kernels(self, ev: ev_t.KernelsEvent) -> None:  # kernels = { level = C }
        load = kernel_load_text(ev.get("concurrency"), ev.get("load")) or "?"
        sim = " (SIMULATED)" if (ev.get("server") or {}).get("simulated") else ""
        basis = "decode" if ev.get("basis") == "decode" else "all"
        fams = sorted(ev.get("families") or [], key=lambda f: -(f.get("share") or 0.0))[:3]
        def cores(flag: Any) -> str:
            return "on tensor cores" if flag is True else "on CUDA cores" if flag is False \
                else "cores unknown"

        parts = [f"{f.get('label') or f.get('family')} {100 * float(f.get('share') or 0):.0f} %"
                 f" {cores(f.get('tensor_cores'))}" for f in fams]
        _say(f"    kernels{sim} at {load}: share of {basis} GPU time: {', '.join(parts)}")
        note = (ev.get("load") or {}).get("batch_note")
        if note:
            _say(f"    kernels: {note}")

    def kernels_failed(self, ev: ev_t.KernelsFailedEvent) -> None:
        _say(f"    {ev.get('message')} (the run and its sweep are kept)")

    def notice(self, ev: ev_t.NoticeEvent) -> None:
        _say(f"note: {ev.get('message')}")

    def journal_torn(self, ev: ev_t.JournalTornEvent) -> None:
        _say(f"warning: a torn journal line at byte {ev.get('offset')} was skipped: "
             f"{ev.get('text')!r}")

    def store_waiting(self, ev: reducer.StoreWaiting) -> None:
        if ev.get("waited_s", 0) >= 2 and not self.store_busy:
            self.store_busy = True
            _say(f"note: the run store is busy; {ev.get('pending')} events wait (the host's "
                 "journal keeps them)")

    def store_ok(self, ev: reducer.StoreWaiting) -> None:
        if self.store_busy:
            self.store_busy = False
            _say(f"note: the run store is writable again after {ev.get('waited_s')} s; "
                 "nothing was lost")

    def ingest_error(self, ev: reducer.IngestError) -> None:
        _say(f"warning: journal event {ev.get('seq')} ({ev.get('event_type')}) could not be "
             f"stored: {ev.get('error')}")


def matrix_rows(info: dict[str, Any], store: RunStore) -> tuple[list[str], list[list[str]]]:
    """variant x level: each cell the level's output tok/s (or why there is none)."""
    from dsv4tui.core.campaign.matrix import campaign_matrix

    mx = campaign_matrix(info, store)
    headers = ["variant", "state", *[f"C={c} tok/s" for c in mx.concurrencies], "run", "note"]
    rows = []
    for row in mx.rows:
        rows.append([row.name, row.state, *row.cells, row.run_text, row.note])
    return headers, rows


def _print_status(info: dict[str, Any], store: RunStore, baseline: int = 0) -> None:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.get("created_at") or 0))
    print(f"campaign {info['id']} ({info.get('name')}) on {info.get('host')}: "
          f"{info['state']}  started {when}")
    if info.get("reason"):
        print(f"  {info['reason']}")
    headers, rows = matrix_rows(info, store)
    print(table(rows, headers))
    for v in info.get("variants") or []:  # the reasons in full (the table cuts them)
        if v.get("state") in ("failed", "partial", "cancelled", "interrupted") and \
                v.get("reason"):
            print(f"  {safe_text(v.get('name'))}: {safe_text(v['reason'])}")
            for line in (v.get("error_lines") or [])[-3:]:
                print(f"    | {safe_text(line)}")
    server = info.get("server") or {}
    if server.get("text") and info["state"] != "running":
        print(f"  server: {server['text']}")
    startup = startup_rows(info, store, baseline)
    if startup:
        print()
        print("startup per phase (s, from the server's log; each variant's last launch):")
        print(table(startup, ["variant", *startup_phases.HEAD[1:]]))
    cmp = campaign_comparison(store, info, baseline)
    lines = [] if cmp is None else (verdict_lines(cmp.verdicts(), load_text)
                                    + canary_lines(cmp.canary_verdicts()))
    lines += variant_kernels.lines(variant_kernels.for_campaign(store, info))
    if lines:
        print()
        print("\n".join(safe_text(line) for line in lines))


def startup_rows(info: dict[str, Any], store: RunStore, baseline: int = 0) -> list[list[str]]:
    """Each variant's last launch, phase by phase (startup_phases.HEAD; [] when none has
    phases), the change against the ``baseline`` variant's startup."""
    named = [(safe_text(v.get("name")), last_launch(v, store))
             for v in info.get("variants") or []]
    base = named[baseline][0] if baseline < len(named) else None
    return startup_phases.rows(named, base) if named else []


def last_launch(variant: dict[str, Any], store: RunStore) -> dict[str, Any] | None:
    """The startup of a variant's last run's launch: ``{startup_s, phases: [{name,
    duration_s}]}`` (None: no launch stored)."""
    ids = [int(i) for i in variant.get("run_ids") or []]
    run = store.run(ids[-1]) if ids else None
    launch = store.launch(run.launch_id) if run is not None and run.launch_id else None
    if launch is None:
        return None
    return {"startup_s": launch.startup_s, "phases": (launch.profile or {}).get("phases")}


def with_verdicts(info: dict[str, Any], store: RunStore, baseline: int = 0) -> dict[str, Any]:
    """``campaign status --json``'s ``verdicts``: each variant against the first, per level
    (``ci_low``, ``ci_high``, ``verdict``, ``n_repeats``; docs/metrics.md); each variant's
    ``kernels`` (the campaign's capture of it: run, level, capture_id, error, kind, and the
    newest linked capture's families, tok/s and roofline %; null without either), ``startup_s`` and ``startup_phases`` (seconds per phase of its last launch)."""
    cmp = campaign_comparison(store, info, baseline)
    kernels = variant_kernels.for_campaign(store, info)
    variants = []
    for v, k in zip(info.get("variants") or [], kernels, strict=True):
        launch = last_launch(v, store) or {}
        link = v.get("kernels")  # the journal's word (run, level, capture_id, error, kind)
        found = None if k is None else k.to_json()  # the stored capture's families
        merged = None if link is None and found is None else {**(link or {}), **(found or {})}
        variants.append({**v, "kernels": merged,
                         "startup_s": launch.get("startup_s"),
                         "startup_phases": startup_phases.phase_seconds(launch.get("phases"))})
    return {**info, "variants": variants,
            "verdicts": [] if cmp is None else [v.to_json() for v in cmp.verdicts()],
            "canary": [] if cmp is None else [c.to_json() for c in cmp.canary_verdicts()]}


# -- commands ---------------------------------------------------------------------------------

def _start(args: Any) -> int:
    settings, cfg_path = load_settings(args)
    if not args.name and not args.file:
        raise UserError("campaign start: name a campaign or give --file", EXIT_CONFIG)
    plan = cplan.resolve(settings, args.name, file=Path(args.file) if args.file else None,
                         config_path=cfg_path)
    if getattr(args, "repeats", None):
        plan.repeats = args.repeats
    if getattr(args, "order", None):
        plan.order = args.order
    if args.dry_run:
        from dsv4tui.core.campaign import planning

        labels = [v.label for v in plan.variants]
        with RunStore() as store:
            if args.json:
                print_json({"dry_run": True, **plan.to_json(),
                            "repeats_plan": planning.plan_facts(store, labels, plan.repeats)})
                return 0
            _print_plan(plan)
            for line in planning.plan_lines(store, labels, plan.repeats):
                print(safe_text(line))
        return 0
    spec = plan.agent_spec()

    async def go() -> tuple[str, Collected | None]:
        from dsv4tui.core.hosts.resolve import open_host

        with RunStore() as store:
            async with open_host(plan.host, settings) as host:
                started = await session.start(host, spec, store)
            cid = str(started["id"])
            if args.json and args.detach:
                return cid, None
            _say(f"campaign {cid} ({plan.name}) started on {plan.host} ({runner_text(started)})")
            if args.detach:
                return cid, None
            return cid, await _follow(settings, plan.host, store, cid,
                                      [v.name for v in plan.variants])

    result = _detachable(go())
    if result is None:
        return EXIT_INTERRUPTED
    return _finish(args, settings, plan.host, *result)


def runner_text(started: dict[str, Any]) -> str:
    """Where the runner is: its pid, or on a Slurm host the job it is the payload of."""
    if started.get("slurm_job_id"):
        return (f"runner in Slurm job {started['slurm_job_id']}: every variant a job step of "
                "that one allocation")
    return f"runner pid {started.get('pid')}"


def _print_plan(plan: cplan.CampaignPlan) -> None:
    s = plan.sweep
    levels = ", ".join(f"C={c} n={n}" for c, n in s.levels)
    print(f"campaign {plan.name} on {plan.host}: {len(plan.variants)} variants, repeats "
          f"{plan.repeats}" + (f" ({plan.order}, a restart each)" if plan.repeats > 1 else "")
          + f", on failure {plan.on_failure}" + (f"  ({plan.source})" if plan.source else ""))
    print(f"  sweep: {levels}; input {s.input_len}, output {s.output_len} tokens"
          f"{' (ignore_eos)' if s.ignore_eos else ''}, warm-up {s.warmup}")
    print(f"  sanity: {', '.join(c.name or c.prompt for c in plan.cases) or 'none'}")
    if plan.kernels is not None:
        k = plan.kernels
        print(f"  kernels: a capture per variant after its first sweep, steady load C={k.level}"
              f" ({k.steps} steps profiled, output {k.output_len} tokens)")
    if plan.slurm is not None:
        print(f"  one Slurm job of {plan.slurm.nodes} nodes for every variant (the runner on "
              "node 0; each variant's ranks a job step, stopped with scancel of the step)")
    for v in plan.variants:
        print(f"  [{v.index + 1}] {v.name} (label {v.label}): profile {v.profile_name}, "
              f"backend {v.launch.backend}, checkpoint {v.launch.checkpoint}")
        for r, rank in enumerate(v.ranks or [v.launch]):
            print(f"      {f'rank {r}: ' if v.ranks else ''}{rank.command_line()}")
        for w in v.warnings:
            print(f"      warning: {w}")


async def _follow(settings: Any, host_name: str, store: RunStore, cid: str,
                  names: list[str] | None = None) -> Collected:
    from dsv4tui.core.bench_runner import gpu_names
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.core.hosts.supervisor import HostSupervisor

    sup = HostSupervisor(host_spec(host_name, settings))
    try:
        host = await sup.wait_connected()
        gpus = await gpu_names(host.agent)
        return await session.follow_to_end(
            sup.wait_connected, store, cid, on_event=Printer(names), gpu_names=gpus,
            on_link=lambda why: _say(f"link lost ({why}); the campaign goes on on "
                                     f"{host_name}; reconnecting ..."))
    except asyncio.CancelledError:
        _say(f"detached; the campaign goes on on {host_name} (dsv4tui campaign attach "
             f"{host_name} {cid})")
        raise
    finally:
        await sup.stop()


def _detachable(go: Any) -> Any:
    """Run ``go``; None when Ctrl-C detached (exit 130 without an error line: the campaign
    goes on, and the line before said how to attach again)."""
    try:
        return run_async(go)
    except UserError as exc:
        if exc.exit_code == EXIT_INTERRUPTED:
            return None
        raise


def _finish(args: Any, settings: Any, host_name: str, cid: str,
            collected: Collected | None) -> int:
    if collected is None:
        if args.json:
            print_json({"id": cid, "host": host_name, "state": "running"})
        else:
            print(cid)
        return 0
    with RunStore() as store:
        row = cstore.get(store, cid)
        info: dict[str, Any] = (_info_from_store(row, store) if row else
                                {"id": cid, "state": collected.state})
        if collected.state != "running":
            written = write_report(store, cid)
            if written is not None:
                info["report"] = str(written)
        if args.json:
            print_json(with_verdicts(info, store))
        else:
            _print_status(info, store)
            if collected.unstored:
                print(f"warning: {collected.unstored} events are not in the store yet (it was "
                      f"busy); they are kept on the host: dsv4tui campaign attach {host_name} "
                      f"{cid}", file=sys.stderr)
    failed = [v for v in info.get("variants") or [] if v.get("state") == "failed"]
    return 0 if info.get("state") in ENDED_OK and not failed else EXIT_FAILED


def write_report(store: RunStore, cid: str) -> Path | None:
    """The campaign's report at its end, in the data dir's reports folder; says where (or
    why there is none: matplotlib missing, nothing to write). Never fails the command."""
    from dsv4tui.core.campaign import charts, report

    if not charts.available():
        _say(f"note: no report written ({charts.INSTALL_HINT}; then dsv4tui campaign report "
             f"HOST {cid})")
        return None
    try:
        rep = report.build_campaign(store, cid)
        path = report.write(rep, report.default_path(f"campaign-{cid}"))[0]
    except UserError as exc:
        _say(f"warning: the campaign's report could not be written: {exc.message}")
        return None
    _say(f"report: {safe_text(str(path))}")
    return path


def _report(args: Any) -> int:
    """``campaign report HOST ID``: collect what the store lacks (when the host answers),
    then write the report from the store."""
    from dsv4tui.cli.runs import print_written, report_paths
    from dsv4tui.core.campaign import charts, report
    from dsv4tui.core.errors import ConnectError

    settings, _ = load_settings(args)
    charts.require()

    async def collect(store: RunStore) -> None:
        from dsv4tui.core.hosts.resolve import open_host

        async with open_host(args.host, settings) as host:
            await session.attach(host, store, args.id, follow=False)

    with RunStore() as store:
        try:
            run_async(collect(store))
        except ConnectError as exc:
            if cstore.get(store, args.id) is None:
                raise
            _say(f"note: {args.host} did not answer ({exc.message}); the report holds what "
                 "the run store has collected")
        rep = report.build_campaign(store, args.id)
        path, fmt = report_paths(args.out, args.format, f"campaign-{args.id}")
        written = report.write(rep, path, fmt, args.theme)
    for note in rep.notes:
        _say(f"note: {note}")
    print_written(written, args.json, campaign=args.id, runs=[f.run.id for f in rep.facts])
    return 0


def _info_from_store(row: cstore.CampaignRow, store: RunStore) -> dict[str, Any]:
    """A campaign's status as the store has collected it (same shape as the host's)."""
    info = {"id": row.id, "name": row.name, "kind": row.kind, "host": row.host,
            "state": row.state, "created_at": row.created_at, "ended_at": row.ended_at,
            "reason": row.error, "plan": row.detail.get("plan"),
            "variants": [dict(v) for v in row.detail.get("variants") or []],
            "server": row.detail.get("server"), "torn": row.detail.get("torn") or []}
    return session.with_run_ids(info, cstore.run_ids(store, row.id))


async def _pick(host: Any, cid: str | None) -> dict[str, Any]:
    """The campaign named (its status, so a wrong id fails here), or the one running, or
    the newest."""
    if cid:
        return session.event_of(await host.agent.call("campaign", "status", cid), "campaign")
    found = await session.listing(host)
    if not found:
        raise NotFoundError(f"{host.name}: no campaigns on this host")
    running = [c for c in found if c.get("state") == "running"]
    return (running or found)[-1]


def _attach(args: Any) -> int:
    settings, _ = load_settings(args)

    async def go() -> tuple[str, Collected]:
        from dsv4tui.core.hosts.resolve import open_host

        async with open_host(args.host, settings) as host:
            info = await _pick(host, args.id)
        cid = str(info["id"])
        names = [str(v.get("name")) for v in info.get("variants") or []]
        with RunStore() as store:
            _say(f"attached to campaign {cid} ({info.get('name')}, {info.get('state')}) on "
                 f"{args.host}")
            return cid, await _follow(settings, args.host, store, cid, names)

    result = _detachable(go())
    if result is None:
        return EXIT_INTERRUPTED
    return _finish(args, settings, args.host, *result)


def _status(args: Any) -> int:
    settings, _ = load_settings(args)

    async def go() -> dict[str, Any]:
        from dsv4tui.core.hosts.resolve import open_host

        with RunStore() as store:
            async with open_host(args.host, settings) as host:
                cid = str((await _pick(host, args.id))["id"])
                return await session.status(host, store, cid)

    info = run_async(go())
    names = [str(v.get("name")) for v in info.get("variants") or []]
    if args.baseline is not None and args.baseline not in names:
        raise UserError(f"campaign status: no variant {args.baseline!r} in campaign "
                        f"{info.get('id')}; it has: {', '.join(names)}", EXIT_CONFIG)
    base = names.index(args.baseline) if args.baseline is not None else 0
    with RunStore() as store:
        if args.json:
            print_json(with_verdicts(info, store, base))
        else:
            _print_status(info, store, base)
    return 0


def _list(args: Any) -> int:
    settings, _ = load_settings(args)

    async def go() -> list[dict[str, Any]]:
        from dsv4tui.core.hosts.resolve import open_host

        async with open_host(args.host, settings) as host:
            return await session.listing(host)

    found = run_async(go())
    if args.json:
        print_json(found)
        return 0
    if not found:
        print(f"{args.host}: no campaigns yet (dsv4tui campaign start NAME)")
        return 0
    rows = []
    for c in found:
        done = sum(1 for v in c.get("variants") or [] if v.get("state") in ("done", "partial"))
        failed = sum(1 for v in c.get("variants") or [] if v.get("state") == "failed")
        rows.append([c["id"], str(c.get("name")), str(c.get("kind")), c["state"],
                     f"{done}/{len(c.get('variants') or [])}", str(failed),
                     time.strftime("%m-%d %H:%M", time.localtime(c.get("created_at") or 0))])
    print(table(rows, ["ID", "name", "kind", "state", "done", "failed", "started"]))
    return 0


def _cancel(args: Any) -> int:
    settings, _ = load_settings(args)

    async def go() -> dict[str, Any]:
        from dsv4tui.core.hosts.resolve import open_host

        with RunStore() as store:
            async with open_host(args.host, settings) as host:
                return await session.cancel(host, store, args.id)

    out = run_async(go())
    if args.json:
        print_json(out)
        return 0
    server = (out.get("server") or {}).get("text") or "server state unknown"
    if out.get("was_running"):
        print(f"campaign {args.id} cancelled; finished requests are stored; {server}")
    else:
        print(f"campaign {args.id}: {out.get('message')}; {server}")
    return 0


def _resume(args: Any) -> int:
    settings, _ = load_settings(args)

    async def go() -> tuple[str, Collected | None]:
        from dsv4tui.core.hosts.resolve import open_host

        with RunStore() as store:
            async with open_host(args.host, settings) as host:
                started = await session.resume(host, args.id)
            _say(f"campaign {args.id} resumed on {args.host} ({runner_text(started)})")
            if args.detach:
                return args.id, None
            return args.id, await _follow(settings, args.host, store, args.id)

    result = _detachable(go())
    if result is None:
        return EXIT_INTERRUPTED
    return _finish(args, settings, args.host, *result)
