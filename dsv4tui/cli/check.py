"""`dsv4tui check HOST`: connect, deploy the agent, run hello; report each step."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_FAILED, UserError
from dsv4tui.core.hosts import deploy, resolve
from dsv4tui.core.hosts.session import HostSession


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
    sglang: list[dict[str, Any]] = field(default_factory=list)  # per profile python
    exit_code: int = 0

    def add(self, name: str, ok: bool, detail: str, t0: float) -> None:
        self.steps.append(Step(name, ok, detail, time.perf_counter() - t0))


def register(sub: Any) -> None:
    p = sub.add_parser("check")
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
        await _sglang_step(report, hello, host)
        return report
    finally:
        if session is not None:
            await session.close()


def _arch(hello: dict[str, Any]) -> str:
    from dsv4tui.core.server.sglang_choices import sm_name

    sm = sm_name(hello.get("compute_capability"))
    return f" ({sm})" if sm else ""


def _driver_step(report: Report, hello: dict[str, Any]) -> None:
    nvml = hello.get("nvml") or {}
    sim = hello.get("simulated_gpus") or {}
    if sim.get("gpus") and not nvml.get("available"):
        names = sorted(set(sim["gpus"]))
        report.steps.append(Step("NVIDIA driver", True, f"SIMULATED: {len(sim['gpus'])} GPU(s): "
                                 f"{', '.join(names)}{_arch(hello)}", 0.0))
    elif nvml.get("available"):
        gpus = hello.get("gpus") or []
        names = sorted(set(gpus))
        cuda = f" (CUDA {nvml['cuda_driver_version']})" if nvml.get("cuda_driver_version") \
            else ""
        report.steps.append(Step("NVIDIA driver", True, f"driver {nvml.get('driver')}{cuda}, "
                                 f"{len(gpus)} GPU(s): {', '.join(names)}{_arch(hello)}", 0.0))
    elif hello.get("nvidia_smi"):
        report.steps.append(Step("NVIDIA driver", True, "nvidia-smi only (NVML: "
                                 f"{nvml.get('reason')})", 0.0))
    else:
        report.steps.append(Step("NVIDIA driver", False, f"no NVIDIA driver ({nvml.get('reason')})",
                                 0.0, absent=True))


async def _sglang_step(report: Report, hello: dict[str, Any], host: Any) -> None:
    """The SGLang of each launch profile's python (with its env), and whose choice lists its
    launches are checked against; without profiles, the agent's own python's."""
    from dsv4tui.core.server import sglang_choices, sglang_version

    found: list[tuple[sglang_version.SglangVersion, list[str]]] = []
    for name, prof in host.config.profiles.items():
        v = await sglang_version.probe(host, prof)
        same = next((f for f in found if f[0] == v), None)
        if same is not None:
            same[1].append(name)
        else:
            found.append((v, [name]))
    if not found:
        found = [(sglang_version.from_probe(str(p.get("python_path") or p.get("python")), p), [])
                 for p in hello.get("sglang") or []]
    report.sglang = [{**v.to_json(), "profiles": names} for v, names in found]
    parts = []
    for v, names in found:
        text = v.text() + (f" (profile{'s' if len(names) > 1 else ''} {', '.join(names)})"
                           if names else "")
        if v.version:
            lists, note = sglang_choices.lists_for(v.version)
            text += f"; launches checked against {lists.version}'s choices" + (
                f" ({note})" if note else "")
        parts.append(text)
    ok = any(v.version for v, _ in found)
    report.steps.append(Step("sglang", ok, "; ".join(parts) or "no interpreter probed", 0.0,
                             absent=not ok))


def run(args: argparse.Namespace) -> int:
    report = run_async(check_host(args.host, args))
    if args.json:
        print_json({"host": report.host, "ok": report.exit_code == 0,
                    "steps": [s.as_dict() for s in report.steps], "hello": report.hello,
                    "sglang": report.sglang})
    else:
        for s in report.steps:
            print(safe_text(f"{s.status.upper() if not s.ok else s.status:<6}  {s.name:<14} "
                            f"{s.detail}"))
    return report.exit_code
