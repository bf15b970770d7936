"""CLI: ``dsv4tui server status|start|stop|restart|metrics HOST``.

start/restart print each startup phase with its duration as it happens and the startup time
(launch -> ready); on failure the log excerpt, exit 1. ``--dry-run`` prints what would launch
without connecting.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dsv4tui.cli.output import ask, print_json
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_FAILED, UserError
from dsv4tui.core.server import control as server_control
from dsv4tui.core.server import next_move
from dsv4tui.core.server.backends import refuse_backend
from dsv4tui.core.server.launch import LaunchPlan
from dsv4tui.core.server.next_move import sets_to_overrides
from dsv4tui.core.server.startup import OTHER, STARTUP, startup_text


def register(sub: Any) -> None:
    p = sub.add_parser("server")
    cmds = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)

    def common(name: str, help_: str, *, profile: bool = True) -> argparse.ArgumentParser:
        c = cmds.add_parser(name, help=help_)
        c.add_argument("host", metavar="HOST", help="local, demo, a [hosts] name, an ssh alias")
        if profile:
            c.add_argument("--profile", "-p", help="server profile (default: the host's default)")
        c.add_argument("--json", action="store_true", help="print JSON")
        return c

    s = common("status", "stopped / starting (phase) / ready / crashed / foreign")
    s.add_argument("--dry-run", action="store_true",
                   help="print what would be asked, without connecting")
    s.set_defaults(func=_status)
    for name, help_ in (("start", "launch the profile and follow it until ready"),
                        ("restart", "stop ours (if running), launch, follow until ready")):
        c = common(name, help_)
        c.add_argument("--backend", "-b", metavar="NAME",
                       help="switch --moe-runner-backend for this launch")
        c.add_argument("--set", action="append", default=[], metavar="FLAG=VALUE",
                       help="set an SGLang flag for this launch only (repeatable), e.g. "
                       "--set cuda-graph-max-bs-decode=128: a flag a profile field owns "
                       "changes the field, any other joins or replaces the profile's extra_args")
        c.add_argument("--dry-run", action="store_true",
                       help="validate and print the launch without connecting")
        c.add_argument("--force", action="store_true",
                       help="launch a --backend that does not fit the profile's checkpoint "
                       "or whose kernels do not run on the host's GPUs")
        c.add_argument("--timeout", type=float, default=server_control.DEFAULT_TIMEOUT_S,
                       help="seconds to wait for ready (default 1800)")
        c.add_argument("--grace", type=float, default=server_control.DEFAULT_GRACE_S,
                       help="drain time when stopping the old server (default 60 s)")
        if name == "start":
            c.add_argument("--no-wait", action="store_true", help="return once launched")
        c.set_defaults(func=_start, restart=name == "restart")
    a = common("adopt", "take over a server dsv4tui did not start: its launch becomes a "
               "profile in the config (after you confirm); nothing is stopped", profile=False)
    a.add_argument("--profile", "-p", metavar="NAME",
                   help="the profile to write (default: adopted; one of that name is replaced)")
    a.add_argument("--port", type=int, help="the server's port (default: the host's default "
                   "profile's, else 30000)")
    a.add_argument("--api-key-env", metavar="NAME", help="for a server started with --api-key: "
                   "the variable on the host that holds the key (the key is never written)")
    a.add_argument("--keep-default", action="store_true",
                   help="do not make the adopted profile the host's default")
    a.add_argument("--yes", "-y", action="store_true", help="write without asking")
    a.add_argument("--dry-run", action="store_true",
                   help="show what would be written; change nothing")
    a.set_defaults(func=_adopt)
    t = common("stop", "SIGTERM, drain, then SIGKILL the server dsv4tui started", profile=False)
    t.add_argument("--grace", type=float, default=server_control.DEFAULT_GRACE_S,
                   help="drain time before SIGKILL (default 60 s)")
    t.add_argument("--dry-run", action="store_true",
                   help="print what would be stopped, without connecting")
    t.set_defaults(func=_stop)
    from dsv4tui.cli import server_metrics

    server_metrics.add_parser(cmds)


# -- start / restart -------------------------------------------------------------------------

def _print_plan(host: str, launch: LaunchPlan, restart: bool, running: str | None = None) -> None:
    """``running``: the backend of the server this restart replaces (what runs, not what the
    profile says), the "from" of ``backend X -> Y``."""
    change = launch.changes.get("moe_runner_backend")
    if running is not None:
        backend = launch.backend if running == launch.backend else f"{running} -> {launch.backend}"
    else:
        backend = (f"{change['from']} -> {change['to']}" if change else launch.backend)
    print(safe_text(f"{'restart' if restart else 'start'} {host}: profile "
                    f"{launch.profile_name}, backend {backend}, checkpoint {launch.checkpoint}, "
                    f"port {launch.port}"))
    for w in launch.warnings:
        print(f"  warning: {safe_text(w)}")


def check_backend(config: Any, profile: str | None, backend: str | None, force: bool) -> str | None:
    """Refuse (exit 2) a ``--backend`` that cannot run the profile's checkpoint, before any
    connection (the GPUs are checked once connected); with ``force`` the reason comes back
    as a warning instead."""
    if not backend:
        return None
    _, prof = config.profile(profile)
    return refuse_backend(prof, backend, None, force=force)


def launch_overrides(config: Any, args: Any) -> dict[str, Any] | None:
    """``--set FLAG=VALUE`` items as the launch's profile overrides (validated by the plan)."""
    if not getattr(args, "set", None):
        return None
    _, prof = config.profile(args.profile)
    return sets_to_overrides(prof, args.set)


def _dry_run(args: Any) -> int:
    from dsv4tui.core.hosts.resolve import host_spec

    settings, _ = load_settings(args)
    spec = host_spec(args.host, settings)
    misfit = check_backend(spec.config, args.profile, args.backend, args.force)
    if spec.group:
        return _dry_run_nodes(args, spec, misfit)
    if spec.config.slurm is not None:
        return _dry_run_slurm(args, spec, misfit)
    _, launch = server_control.plan(spec.config, args.profile, args.backend,
                                    overrides=launch_overrides(spec.config, args))
    if args.json:
        print_json({"host": args.host, "dry_run": True, "backend_misfit": misfit,
                    **launch.to_json()})
        return 0
    _print_plan(args.host, launch, args.restart)
    if misfit:
        print(f"  warning: {safe_text(misfit)} (--force)")
    print(safe_text(f"  would run: {launch.command_line()}"))
    print(safe_text(f"  log file:  {launch.log_file}  (relative paths: in the agent's cache "
                    "dir)"))
    if launch.api_key_env:
        print(f"  api key:   from ${launch.api_key_env} on the host")
    return 0


def _dry_run_nodes(args: Any, spec: Any, misfit: str | None) -> int:
    """--dry-run on a host made of nodes: every node's argv."""
    from dsv4tui.core.nodes.group import plan_nodes

    plans = plan_nodes(spec.config, list(spec.group), args.profile, args.backend)
    if args.json:
        print_json({"host": args.host, "dry_run": True, "backend_misfit": misfit,
                    "profile": plans[0].launch.profile_name,
                    "nodes": [p.to_json() for p in plans]})
        return 0
    _print_plan(args.host, plans[0].launch, args.restart)
    print(safe_text(f"  {len(plans)} nodes; dist init address "
                    f"{plans[0].launch.profile.get('dist_init_addr')}"))
    if misfit:
        print(f"  warning: {safe_text(misfit)} (--force)")
    for p in plans:
        print(safe_text(f"  node {p.node} (rank {p.rank}) would run: "
                        f"{p.launch.command_line()}"))
    print(safe_text(f"  log file:  {plans[0].launch.log_file} on each node  (relative paths: in "
                    "the agent's cache dir)"))
    return 0


def _dry_run_slurm(args: Any, spec: Any, misfit: str | None) -> int:
    """--dry-run on a Slurm host: the sbatch script and each rank's argv."""
    from dsv4tui.core.launchers import slurm

    p = slurm.plan(spec.config, args.host, args.profile, args.backend,
                   local=spec.kind != "ssh")
    if args.json:
        print_json({"dry_run": True, "backend_misfit": misfit, **p.to_json()})
        return 0
    _print_plan(args.host, p.launch, args.restart)
    print(safe_text(f"  one Slurm job of {len(p.ranks)} nodes (sbatch --parsable, srun "
                    f"--kill-on-bad-exit=1); dist init address "
                    f"{p.dist_addr or f'node 0 address:{p.dist_port}'}"))
    if misfit:
        print(f"  warning: {safe_text(misfit)} (--force)")
    for r, launch in enumerate(p.ranks):
        print(safe_text(f"  rank {r} (SLURM_NODEID={r}) would run: {launch.command_line()}"))
    print("  sbatch script:")
    for line in p.script.splitlines():
        print(safe_text(f"    {line}"))
    return 0


class _Printer:
    """Prints startup steps as they happen (a rewritten progress line on a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.progress = False

    def __call__(self, step: server_control.StartupStep) -> None:
        if step.node is not None:
            self.node = f"[{step.node}] "
        self._step(step)
        self.node = ""

    node = ""  # "[h200b] " while a node's step prints

    def _line(self, text: str) -> None:
        if self.progress:
            sys.stdout.write("\r\x1b[K")
            self.progress = False
        if self.node:
            text = "  " + self.node + text.lstrip()
        print(text, flush=True)

    def _step(self, step: server_control.StartupStep) -> None:
        ev = step.event
        if step.kind == "stopping" and not ev:
            self._line(f"  {safe_text(step.text)} ...")
        elif step.kind == "stopping":
            self._line(f"  stopping our server (pid {ev.get('pid')}, drain up to "
                       f"{ev.get('grace_s'):g} s) ...")
        elif step.kind == "stopped":
            self._line("  " + stop_text(ev))
        elif step.kind == "started":
            self._line(f"  started pid {ev.get('pid')}; log {safe_text(ev.get('log'))}")
        elif step.kind == "progress" and self.tty:
            sys.stdout.write(f"\r  {self.node}load_weights  {step.percent:3d}%  "
                             f"(+{step.elapsed_s or 0:.1f} s)")
            sys.stdout.flush()
            self.progress = True
        elif step.kind == "phase":
            dur = f"{step.duration_s:8.2f} s" if step.duration_s is not None else "       ? s"
            stage = f"  [{safe_text(step.text)}]" if step.text else ""
            self._line(f"  {safe_text(step.name):<13}{dur}   (+{step.elapsed_s or 0:.1f} s)"
                       f"{stage}")
        elif step.kind == "error":
            self._line(f"  ! {safe_text(step.name)}: {safe_text(step.text)}")
        elif step.kind == "slurm":
            self._line(f"  {safe_text(step.text)}")


def _start(args: Any) -> int:
    if args.dry_run:
        return _dry_run(args)
    from dsv4tui.core.hosts.resolve import host_spec, open_host
    from dsv4tui.core.store import RunStore

    settings, _ = load_settings(args)
    config = host_spec(args.host, settings).config
    misfit = check_backend(config, args.profile, args.backend, args.force)
    if misfit and not args.json:
        print(f"warning: {safe_text(misfit)} (--force)", file=sys.stderr)
    overrides = launch_overrides(config, args)
    if overrides:  # a bad --set fails here, before anything is connected or stopped
        server_control.plan(config, args.profile, args.backend, overrides=overrides)
    facts: dict[str, Any] = {}  # what the failure's next move needs: the GPUs' capability

    async def go(store: RunStore) -> server_control.StartResult:
        from dsv4tui.core.server import host_facts, sglang_version

        async with open_host(args.host, settings) as host:
            _, prof = host.config.profile(args.profile)
            if host.config.slurm is not None:  # the GPUs are the job's, not the login node's
                if not args.json:
                    _print_plan(args.host, server_control.plan(
                        host.config, args.profile, args.backend)[1], args.restart)
                return await server_control.start(
                    host, args.profile, args.backend, replace=args.restart,
                    wait=not getattr(args, "no_wait", False), timeout=args.timeout,
                    on_step=None if args.json else _Printer(), store=store,
                    overrides=overrides)
            # the GPUs: a backend whose kernels do not run there is refused before the
            # running server is stopped (the checkpoint was checked before connecting)
            facts["capability"] = await host_facts.capability(host)
            gpu = refuse_backend(prof, args.backend, facts["capability"], force=args.force)
            if gpu and gpu != misfit and not args.json:
                print(f"warning: {safe_text(gpu)} (--force)", file=sys.stderr)
            found = await sglang_version.probe(host, prof)
            _, launch = server_control.plan(host.config, args.profile, args.backend,
                                            overrides=overrides, sglang_version=found.version)
            running = server_control.running_backend(
                await server_control.status(host, args.profile)) if args.restart else None
            if not args.json:
                _print_plan(args.host, launch, args.restart, running)
                print(safe_text(f"  {found.text()}; flags checked against SGLang "
                                f"{launch.choices_version}'s choices"))
            return await server_control.start(
                host, args.profile, args.backend, replace=args.restart,
                wait=not getattr(args, "no_wait", False), grace=args.grace, timeout=args.timeout,
                on_step=None if args.json else _Printer(), store=store, sglang=found,
                config_path=getattr(args, "config", None), overrides=overrides)

    try:
        with RunStore() as store:
            result = run_async(go(store))
    except server_control.StartupFailed as err:
        launch = err.result.launch
        move = next_move.suggest(err.failure, launch.argv, launch.profile,
                                 facts.get("capability"))
        if args.json:
            print_json({"ok": False, "kind": err.kind, "error": err.message,
                        "excerpt": err.excerpt, **err.result.to_json(),
                        **failure_json(args.host, err.result.profile, err.failure, move,
                                       args.set, args.backend)})
        else:
            print(f"FAILED: {safe_text(err.message)}")
            if err.excerpt:
                print("log excerpt:")
                for line in err.excerpt:
                    print(f"  | {safe_text(line)}")
            for line in next_move_lines(args.host, err.result.profile, move, args.set,
                                        args.backend):
                print(safe_text(line))
        return EXIT_FAILED
    if result.store_error:
        print(f"warning: the launch was not recorded: {safe_text(result.store_error)}",
              file=sys.stderr)
    if args.json:
        print_json({"ok": True, **result.to_json()})
    elif result.slurm is not None:
        job = result.slurm["job_id"]
        if result.ready:
            print(f"ready: {startup_text(result.startup_s)} (RUNNING -> node 0 answers), "
                  f"Slurm job {job} on {', '.join(result.slurm.get('nodes') or [])}, queue "
                  f"wait {result.slurm.get('queue_wait_s', 0):.1f} s")
        else:
            print(f"submitted Slurm job {job} (not waiting for ready; `dsv4tui server status "
                  f"{args.host}` follows it)")
    elif result.nodes is not None and result.ready:
        print(f"ready: {startup_text(result.startup_s)} (launch -> every node ready), "
              f"port {result.launch.port} on node {result.nodes[0]['node']}")
        for n in result.nodes:
            print(safe_text(f"  node {n['node']} (rank {n['rank']}): pid {n.get('pid')}, ready "
                            f"after {n.get('startup_s') or 0:.1f} s"))
        print("  a watcher stops every node if one of them fails")
    elif result.ready:
        if result.other_s is not None:  # the phases add up to the startup with it
            print(f"  {'other':<13}{result.other_s:8.2f} s   ({OTHER})")
        print(f"ready: {startup_text(result.startup_s)} ({STARTUP}), pid {result.pid}, "
              f"port {result.launch.port}")
    else:
        print(f"launched pid {result.pid} (not waiting for ready)")
    return 0


def failure_json(host: str, profile: str | None, failure: dict[str, Any] | None,
                 move: next_move.Suggestion | None, sets: list[str] | None = None,
                 backend: str | None = None) -> dict[str, Any]:
    """``cause`` (one line), ``failure`` (the agent's class of it) and ``suggestion``
    ({flag, from, to, why, command}) of a failed start."""
    return {"cause": (failure or {}).get("cause"), "failure": failure,
            "suggestion": move.to_json(host, profile, sets or (), backend) if move else None}


def next_move_lines(host: str, profile: str | None, move: next_move.Suggestion | None,
                    sets: list[str] | None = None, backend: str | None = None) -> list[str]:
    """``cause: ...`` and ``try: dsv4tui server restart ...`` (or what to look at)."""
    if move is None:
        return []
    lines = [f"cause: {move.cause}"]
    command = move.command(host, profile, sets or (), backend)
    if command:
        lines += [f"try: {command}", f"     ({move.text()})"]
    else:
        lines.append(f"next: {move.text()}")
    return lines


# -- stop / status ---------------------------------------------------------------------------

def stop_text(ev: dict[str, Any]) -> str:
    how = ev.get("how")
    if how == "not_running":
        text = "no server started by dsv4tui is running"
        return text + (f"; {ev['note']}" if ev.get("note") else "")
    if how == "orphans":
        ended = ev.get("ended_pids") or []
        text = (f"the server (pid {ev.get('pid')}) had already exited; ended the "
                f"{len(ended)} process(es) of its launch it left running (pids {ended})")
    elif how == "sigterm":
        text = f"stopped pid {ev.get('pid')} by SIGTERM after a {ev.get('drain_s'):.1f} s drain"
    else:
        text = f"killed pid {ev.get('pid')} with SIGKILL (it did not exit within the grace time)"
    freed = ev.get("gpu_mem_freed_mib")
    if freed is not None:
        src = " (simulated)" if ev.get("gpu_mem_source") == "simulated" else ""
        text += f"; GPU memory freed: {freed:,.0f} MiB{src}"
    if ev.get("gpu_mem_reason"):
        text += f"; {ev['gpu_mem_reason']}"
    if ev.get("leftover_pids"):
        text += f"; STILL ALIVE: pids {ev['leftover_pids']}"
    if ev.get("note"):
        text += f"; {ev['note']}"
    return text


def _stop(args: Any) -> int:
    from dsv4tui.core.hosts.resolve import host_spec, open_host

    settings, _ = load_settings(args)
    if args.dry_run:
        host_spec(args.host, settings)  # an unknown host fails here, as it would connecting
        plan = {"host": args.host, "dry_run": True, "action": "stop", "grace_s": args.grace,
                "agent_args": ["server", "stop", "--grace", f"{args.grace:g}"]}
        if args.json:
            print_json(plan)
        else:
            print(safe_text(f"would stop the server dsv4tui started on {args.host}: SIGTERM, "
                            f"drain up to {args.grace:g} s, then SIGKILL (a server dsv4tui "
                            "did not start is never stopped); nothing was connected"))
        return 0

    async def go() -> dict[str, Any]:
        async with open_host(args.host, settings) as host:
            return await server_control.stop(host, args.grace)

    ev = run_async(go())
    if args.json:
        print_json({k: v for k, v in ev.items() if k not in ("type", "v")})
    elif "job_id" in ev or host_spec(args.host, settings).config.slurm is not None:
        from dsv4tui.core.launchers import slurm

        print(safe_text(slurm.stop_text(args.host, ev)))
    elif ev.get("nodes") is not None:
        for n in ev["nodes"]:
            text = n["error"] if n.get("error") else stop_text(n)
            print(safe_text(f"{args.host} node {n['node']} (rank {n['rank']}): {text}"))
    else:
        print(safe_text(f"{args.host}: {stop_text(ev)}"))
    return EXIT_FAILED if ev.get("leftover_pids") or ev.get("errors") else 0


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else \
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{seconds:.1f} s"


def status_move(ev: dict[str, Any]) -> next_move.Suggestion | None:
    """A crashed server's next move, from its status (the argv that ran, its profile)."""
    profile = ev.get("profile") if isinstance(ev.get("profile"), dict) else {}
    return next_move.suggest(ev.get("failure"), ev.get("argv") or [], profile)


def status_text(host: str, ev: dict[str, Any]) -> str:
    state = ev.get("state")
    profile = ev.get("profile") or {}
    what = ""
    if profile:
        what = (f", profile {profile.get('name')} ({profile.get('moe_runner_backend') or 'auto'}, "
                f"{profile.get('checkpoint') or profile.get('quantization') or 'default'})")
    if state == "ready":
        startup = f", {startup_text(ev['startup_s'])}" if ev.get("startup_s") else ""
        return (f"{host}: ready - pid {ev.get('pid')}, port {ev.get('port')}, up "
                f"{_duration(ev.get('uptime_s'))}{startup}{what}")
    if state in ("starting", "stopping"):
        pct = f" {ev['load_percent']}%" if ev.get("phase") == "load_weights" and \
            ev.get("load_percent") is not None else ""
        return (f"{host}: {state} - {ev.get('phase_label') or ev.get('phase')}{pct}, pid "
                f"{ev.get('pid')}, port {ev.get('port')}, up {_duration(ev.get('uptime_s'))}{what}")
    if state == "crashed":
        code = ev.get("exit_code")
        how = f"exit code {code}" if code is not None else (
            f"signal {ev['signal']}" if ev.get("signal") else "exit status unknown")
        phase = ev.get("failed_in") or ev.get("phase")
        lines = [f"{host}: crashed - {how} (pid {ev.get('pid')}, phase {phase}){what}"]
        lines += [f"  | {e}" for e in (ev.get("last_errors") or [])[-5:]]
        lines += ["  " + x for x in next_move_lines(host, profile.get("name"), status_move(ev))]
        return "\n".join(lines)
    if state == "foreign":
        owner = ev.get("foreign") or {}
        who = f"pid {owner['pid']}" if owner.get("pid") else "a process we cannot see"
        if owner.get("command"):
            who += f" ({owner['command']})"
        if owner.get("user"):
            who += f" of user {owner['user']}"
        info = ev.get("server_info") or {}
        model = (ev.get("model_info") or {}).get("model_path") or info.get("model_path")
        extra = f", model {model}" if model else ""
        extra += f", sglang {info['version']}" if info.get("version") else ""
        text = (f"{host}: foreign - port {ev.get('port')} is served by {who}; health "
                f"{ev.get('health') or 'no answer'}{extra}. dsv4tui did not start it and will "
                "not stop it (logs and benchmarks can still use it).")
        if ev.get("log"):
            text += f"\n  its log: {ev['log']} (`dsv4tui logs {host}` follows it)"
        if owner.get("pid"):
            text += (f"\n  `dsv4tui server adopt {host}` takes it over: its launch becomes a "
                     "profile, and a restart can change one flag")
        return text
    return f"{host}: stopped (port {ev.get('port')} free)"


def _status(args: Any) -> int:
    from dsv4tui.core.hosts.resolve import host_spec, open_host

    settings, _ = load_settings(args)
    if args.dry_run and host_spec(args.host, settings).group:
        spec = host_spec(args.host, settings)
        nodes = [{"node": s.name, "rank": r} for r, s in enumerate(spec.group)]
        if args.json:
            print_json({"host": args.host, "dry_run": True, "action": "status", "nodes": nodes})
        else:
            print(safe_text(f"would ask every node of {args.host} ("
                            f"{', '.join(s.name for s in spec.group)}) about its server; "
                            "nothing was connected"))
        return 0
    if args.dry_run:
        spec = host_spec(args.host, settings)
        agent_args = ["server", "status"]
        what = "the server dsv4tui started there"
        if spec.config.profiles:
            name, prof = spec.config.profile(args.profile)
            agent_args += ["--port", str(prof.port), "--host", prof.host]
            what += f" and who serves {prof.host}:{prof.port} (profile {name})"
        if args.json:
            print_json({"host": args.host, "dry_run": True, "action": "status",
                        "agent_args": agent_args})
        else:
            print(safe_text(f"would ask {args.host} about {what}; nothing was connected"))
        return 0

    async def go() -> dict[str, Any]:
        async with open_host(args.host, settings) as host:
            return await server_control.status(host, args.profile)

    ev = run_async(go())
    if ev.get("slurm"):
        from dsv4tui.core.launchers import slurm

        if args.json:
            print_json({k: v for k, v in ev.items() if k not in ("type", "v")})
        else:
            print(safe_text(slurm.status_text(args.host, ev), keep_newlines=True))
        return 0
    if ev.get("nodes") is not None:
        from dsv4tui.core.nodes import watch as group_watch

        failure = group_watch.last_failure(args.host)
        if failure and ev.get("state") != "ready":
            ev["failure"] = failure
    if args.json:
        if ev.get("state") == "crashed" and ev.get("nodes") is None:
            ev.update(failure_json(args.host, (ev.get("profile") or {}).get("name"),
                                   ev.get("failure"), status_move(ev)))
        print_json({k: v for k, v in ev.items() if k not in ("type", "v")})
    elif ev.get("nodes") is not None:
        print(safe_text(group_status_text(args.host, ev), keep_newlines=True))
    else:
        print(safe_text(status_text(args.host, ev), keep_newlines=True))
    return 0


def group_status_text(host: str, ev: dict[str, Any]) -> str:
    """A host made of nodes: the group's state, then one line per node (errors under it)."""
    nodes = ev["nodes"]
    head = status_text(host, ev).split("\n")[0] if ev.get("state") in ("ready", "starting") \
        else f"{host}: {ev.get('state')}"
    lines = [f"{head} ({len(nodes)} nodes)"]
    for n in nodes:
        what = n.get("state") or "?"
        if what == "crashed":
            code, sig = n.get("exit_code"), n.get("signal")
            how = f"exit code {code}" if code is not None else f"signal {sig}"
            what += f" ({how})"
        elif n.get("phase") and what == "starting":
            what += f" ({n['phase']})"
        pid = f", pid {n['pid']}" if n.get("pid") else ""
        lines.append(f"  node {n['node']} (rank {n['rank']}): {what}{pid}"
                     + (f" - {n['error']}" if n.get("error") else ""))
        lines += [f"    | {e}" for e in (n.get("last_errors") or [])[-5:]]
    failure = ev.get("failure")
    if failure:
        lines.append(f"  the group was stopped at {failure.get('when')}: node {failure['node']} "
                     f"(rank {failure['rank']}) {failure.get('what')}")
        lines += [f"    | {e}" for e in (failure.get("errors") or [])[-8:]]
    return "\n".join(lines)


# -- adopt -----------------------------------------------------------------------------------

def _adopt(args: Any) -> int:
    from dsv4tui.core.hosts.resolve import host_spec, open_host
    from dsv4tui.core.server import adopt

    settings, path = load_settings(args)
    if args.port is not None and not 1 <= args.port <= 65535:  # 0 is not "the default"
        raise UserError(f"server adopt: --port must be a TCP port, 1 to 65535, not {args.port}",
                        EXIT_CONFIG)
    spec = host_spec(args.host, settings)
    if not (args.yes or args.dry_run or (sys.stdin.isatty() and sys.stdout.isatty())):
        return _refuse_unconfirmed(path)  # before connecting: nobody could say yes
    if spec.simulated:
        raise UserError("the demo host's profiles are built in: adopt servers on a configured "
                        "host, an ssh alias or local", EXIT_CONFIG)
    if args.profile:
        adopt.check_name(args.profile)
    port, bind = args.port if args.port is not None else 30000, None
    if spec.config.profiles:
        _, default = spec.config.profile()
        port, bind = args.port if args.port is not None else default.port, default.host

    async def look() -> adopt.Foreign:
        async with open_host(args.host, settings) as host:
            return await adopt.inspect(host, port, bind, args.api_key_env)

    foreign = run_async(look())
    proposal = adopt.propose(spec.name, spec.config, foreign, args.profile, args.api_key_env,
                             make_default=not args.keep_default)
    adopt.write(path, proposal, dry_run=True)  # the edit is valid before anyone is asked
    if args.json and not args.yes and not args.dry_run:
        return _refuse_unconfirmed(path)  # a script says --yes (or --dry-run)
    if args.json and args.dry_run:
        print_json({"dry_run": True, "config": str(path), **proposal.to_json()})
        return 0
    if not args.json:
        for line in adopt.proposal_lines(proposal):
            print(safe_text(line))
    if args.dry_run:
        print(safe_text(f"dry run: nothing written to {path}, nothing recorded on {args.host}"))
        return 0
    question = f"write profile {proposal.name!r} to {path} and adopt pid {foreign.pid}? [y/N] "
    if not args.yes and not ask(question):
        print("nothing written; the server runs on as before")
        return EXIT_FAILED

    async def take() -> dict[str, Any]:
        async with open_host(args.host, settings) as host:
            return await adopt.record(host, proposal)

    event = run_async(take())
    adopt.write(path, proposal)
    if args.json:
        print_json({"adopted": True, "config": str(path), **proposal.to_json(),
                    "group_leader": event.get("group_leader")})
        return 0
    print(safe_text(f"adopted pid {foreign.pid} on port {foreign.port} as profile "
                    f"{proposal.name!r}{' (the default)' if proposal.make_default else ''}; "
                    f"written to {path}"))
    print(safe_text(f"  `dsv4tui server restart {args.host} --backend NAME` restarts it with one "
                    "change; a stop ends pid "
                    f"{foreign.pid} and the processes it started, nothing else"))
    return 0


def _refuse_unconfirmed(path: Any) -> int:
    raise UserError(f"server adopt: not writing {path} without --yes (no terminal to ask; "
                    "--dry-run shows what would be written)", EXIT_CONFIG)
