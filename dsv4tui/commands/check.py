"""`dsv4tui check HOST`: connect, deploy the agent, run hello; report each step."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.commands.output import load_settings, print_json, run_async
from dsv4tui.errors import EXIT_FAILED, UserError
from dsv4tui.hosts import deploy, resolve
from dsv4tui.hosts.session import HostSession


@dataclass
class Step:
    name: str
    ok: bool
    detail: str
    seconds: float
    absent: bool = False  # a fact about the host (no GPU, no sglang), not a failure of ours

    @property
    def status(self) -> str:
        return "ok" if self.ok else ("absent" if self.absent else "failed")

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.name, "ok": self.ok, "status": self.status, "detail": self.detail,
                "seconds": round(self.seconds, 3)}


@dataclass
class Report:
    host: str
    steps: list[Step] = field(default_factory=list)
    hello: dict[str, Any] | None = None
    exit_code: int = 0

    def add(self, name: str, ok: bool, detail: str, t0: float) -> None:
        self.steps.append(Step(name, ok, detail, time.perf_counter() - t0))


def register(sub: Any) -> None:
    p = sub.add_parser("check", help="connect to HOST, deploy the agent and report what it has")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--accept-new", action="store_true",
                   help="trust an unknown host key on first use (a changed key is still refused)")
    p.set_defaults(func=run)


async def check_host(name: str, args: argparse.Namespace) -> Report:
    settings, _ = load_settings(args)
    spec = resolve.host_spec(name, settings, accept_new=args.accept_new)
    report = Report(spec.name)
    session: HostSession | None = None
    try:
        t0 = time.perf_counter()
        try:
            session = await resolve.connect_session(spec)
        except UserError as err:
            report.add("ssh", False, err.message, t0)
            report.exit_code = err.exit_code
            return report
        report.add("ssh", True, "local (no SSH)" if session.is_local else
                   f"connected to {spec.target}", t0)
        if session.is_local:
            report.add("python", True, f"Python {platform.python_version()} ({sys.executable})",
                       time.perf_counter())
        else:
            t0 = time.perf_counter()
            try:
                version = await deploy.check_python(session, spec.config.python or "python3")
            except UserError as err:
                report.add("python", False, err.message, t0)
                report.exit_code = err.exit_code
                return report
            report.add("python", True, f"Python {version}", t0)
        t0 = time.perf_counter()
        try:
            host = await resolve.prepare_agent(spec, session)
        except UserError as err:
            report.add("agent upload", False, err.message, t0)
            report.exit_code = err.exit_code
            return report
        report.add("agent upload", True, "uploaded" if host.uploaded else
                   ("not needed (local)" if session.is_local else "already there"), t0)
        t0 = time.perf_counter()
        pythons = sorted({p.python for p in spec.config.profiles.values()})
        extra = [a for p in pythons for a in ("--python", p)]
        try:
            hello = next(e for e in await host.agent.call("hello", *extra, timeout=120)
                         if e["type"] == "hello")
        except (UserError, StopIteration) as err:
            report.add("agent hello", False, str(err) or "no hello event", t0)
            report.exit_code = getattr(err, "exit_code", EXIT_FAILED)
            return report
        report.hello = hello
        report.add("agent hello", True, f"agent {hello['agent_version']} on {hello['hostname']}, "
                   f"Python {hello['python']}", t0)
        _driver_step(report, hello)
        _sglang_step(report, hello)
        return report
    finally:
        if session is not None:
            await session.close()


def _driver_step(report: Report, hello: dict[str, Any]) -> None:
    nvml = hello.get("nvml") or {}
    if nvml.get("available"):
        gpus = hello.get("gpus") or []
        names = sorted(set(gpus))
        report.steps.append(Step("NVIDIA driver", True, f"driver {nvml.get('driver')}, "
                                 f"{len(gpus)} GPU(s): {', '.join(names)}", 0.0))
    elif hello.get("nvidia_smi"):
        report.steps.append(Step("NVIDIA driver", True, "nvidia-smi only (NVML: "
                                 f"{nvml.get('reason')})", 0.0))
    else:
        report.steps.append(Step("NVIDIA driver", False, f"no NVIDIA driver ({nvml.get('reason')})",
                                 0.0, absent=True))


def _sglang_step(report: Report, hello: dict[str, Any]) -> None:
    probes = hello.get("sglang") or []
    found = [p for p in probes if p.get("present")]
    if found:
        detail = "; ".join(f"sglang {p.get('version') or '?'} in {p.get('python_path')}"
                           for p in found)
        report.steps.append(Step("sglang", True, detail, 0.0))
    else:
        where = ", ".join(p.get("python_path") or p.get("python", "?") for p in probes)
        report.steps.append(Step("sglang", False, f"not importable from {where}", 0.0, absent=True))


def run(args: argparse.Namespace) -> int:
    report = run_async(check_host(args.host, args))
    if args.json:
        print_json({"host": report.host, "ok": report.exit_code == 0,
                    "steps": [s.as_dict() for s in report.steps], "hello": report.hello})
    else:
        for s in report.steps:
            print(f"{s.status.upper() if not s.ok else s.status:<6}  {s.name:<14} {s.detail}")
    return report.exit_code
