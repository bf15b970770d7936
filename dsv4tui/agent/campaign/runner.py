"""The host-side campaign runner: restart -> ready -> sanity -> sweep, per variant, unattended.

It runs in its own session and process group (forked by ``campaign start`` / ``resume``), so it
outlives the SSH link, the console and the laptop. It holds the host's bench lock for its whole
life (:mod:`bench_lock`), and everything it observes goes to the campaign's journal
(:mod:`journal`): every agent event it causes — the server's stop/start/startup phases, sanity
cases, every finished request, level and sweep — stamped with the variant, launch and run it
belongs to, plus its own ``campaign_*``, ``variant_*``, ``launch_*``, ``run_*`` and
``level_gpus`` events (docs/campaigns.md lists them). ``status.json`` beside the journal is a
small summary for ``campaign status``; the journal stays the truth.

GPU summaries per level come from a telemetry sampler the runner starts next to it (the
agent's own ``telemetry`` command as a subprocess), so they exist even when no console is
attached.

SIGTERM (``campaign cancel``) ends it cleanly: the running sweep keeps what finished, the
run and variant are recorded as cancelled, and ``campaign_end`` says whether the server it
started is left running. SIGKILL leaves a journal without ``campaign_end``: ``campaign status``
then says ``interrupted`` and where, and ``campaign resume`` runs what did not finish.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent import detach, protocol
from dsv4tui.agent.bench import canary
from dsv4tui.agent.bench import sweep as bench
from dsv4tui.agent.campaign import slurm_step, variant_kernels
from dsv4tui.agent.campaign.journal import (
    RESERVE_BYTES,
    Journal,
    Reserve,
    disk_full,
    events,
    free_bytes,
    size_text,
)
from dsv4tui.agent.commands import build_parser
from dsv4tui.agent.host import bench_lock, procs, server, server_metrics, server_state, target
from dsv4tui.agent.host.failure import next_flag, with_flag
from dsv4tui.agent.host.gpu_window import GpuWindow
from dsv4tui.agent.host.launch_spec import LaunchSpec
from dsv4tui.agent.state import read_json, write_json

ENDED = ("done", "failed", "cancelled")
# Free space a runner needs to start (besides its reserve): below it, a campaign would stop
# at its first few events, so start and resume refuse with "host disk full" instead.
MIN_FREE_BYTES = 8 << 20


class Cancelled(Exception):
    """SIGTERM/SIGINT reached the runner between two steps."""


# -- files of a campaign ---------------------------------------------------------------------

def agent_argv() -> List[str]:
    """How to start this agent again (the zipapp we run from, or ``-m dsv4tui.agent``)."""
    main = sys.argv[0] if sys.argv else ""
    if main and os.path.isfile(main) and zipfile.is_zipfile(main):
        return [sys.executable, main]
    return [sys.executable, "-m", "dsv4tui.agent"]


# -- GPU telemetry next to the runner --------------------------------------------------------

class GpuSampler:
    """The agent's ``telemetry`` command as a child process; frames kept for level summaries."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.window = GpuWindow()
        self.lock = threading.Lock()
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.error: Optional[str] = None
        self.frames = 0

    def start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                [*agent_argv(), "telemetry", "--interval", "%g" % self.interval,
                 "--processes-every", "0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            self.error = "telemetry could not start: %s" % exc
            return
        threading.Thread(target=self._read, name="gpu-sampler", daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            ev = protocol.parse_event(raw.decode("utf-8", "replace"))
            if ev is None:
                continue
            if ev.get("type") == "frame":
                with self.lock:
                    if self.window.add(ev):
                        self.frames += 1
            elif ev.get("type") == "error":
                self.error = str(ev.get("message") or "telemetry failed")

    def summary(self, t0: Any, t1: Any) -> List[Dict[str, Any]]:
        if not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)):
            return []
        with self.lock:
            return self.window.summary(float(t0), float(t1))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class RunSink(bench.Sink):
    """The sweep's event sink: events to the journal from a thread (as ``bench sweep`` sends
    them to stdout), each level's GPU summary right after the level, and the server's own
    view of the level (its /metrics read when the level starts and when it ends: server-side
    TTFT / ITL / E2E / queue time, next to the client's numbers in the ``level`` event).

    The two reads block the sweep's loop, on purpose: they come when none of its requests is
    in flight (``level_start`` after the warm-up, before the first send; ``level`` after the
    last request ended), so no timestamp waits on them, and each must be answered before the
    next traffic. Read from a thread instead, the start's answer could come after the level's
    first requests finished (a 2 s /metrics: none of a 1 s level's requests in its view) and
    the end's after the next level's idle probe (tests/test_runner_slow_metrics.py)."""

    def __init__(self, sampler: GpuSampler, url: Optional[str] = None,
                 api_key: Optional[str] = None) -> None:
        super().__init__()
        self.sampler = sampler
        self.levels: List[Dict[str, Any]] = []
        self.url, self.api_key = url, api_key
        self._before: Optional[Dict[str, Any]] = None

    def _scrape(self) -> Optional[Dict[str, Any]]:
        if not self.url:
            return None
        return server_metrics.scrape(self.url, self.api_key, timeout=3.0, full=True)

    def emit(self, type_: str, **fields: Any) -> None:
        # the run/variant an event belongs to is the one now, not when the thread writes it
        ctx = protocol.context
        if type_ == "level_start":  # between the warm-up and the level's first request
            self._before = self._scrape()
        elif type_ == "level":  # the level's requests have all ended
            view = server_metrics.server_view(self._before, self._scrape(),
                                              fields.get("duration_s"))  # the measured window
            fields = dict(fields, server=view)
            self._before = None
        super().emit(type_, **{**ctx, **fields})
        if type_ == "level":
            self.levels.append(fields)
            gpus = self.sampler.summary(fields.get("started_at"), fields.get("finished_at"))
            if gpus:
                super().emit("level_gpus", **ctx, level=fields.get("level"), gpus=gpus)

    def close(self) -> None:
        """Every event written before the run ends (however slow the disk)."""
        self._q.put(None)
        self._thread.join()


# -- the campaign -----------------------------------------------------------------------------

class Status:
    """``status.json``: what ``campaign status`` and ``list`` answer without reading the
    whole journal."""

    def __init__(self, path: str, spec: Dict[str, Any], attempt: int,
                 prior: Optional[Dict[str, Any]], journal: Optional[Dict[str, Any]] = None
                 ) -> None:
        self.path = path
        old = {v.get("name"): dict(v) for v in (prior or {}).get("variants") or []}
        for vi, v in enumerate(spec["variants"]):  # the journal is the truth, not the summary
            seen = old.setdefault(v["name"], {"name": v["name"], "label": v.get("label"),
                                              "runs": [], "reason": None})
            if journal is not None:
                seen["state"] = journal["ended"].get(vi, "pending")
                seen["runs"] = journal["runs"].get(vi, [])
        self.data: Dict[str, Any] = {
            "id": spec["id"], "name": spec.get("name"), "kind": spec.get("kind", "campaign"),
            "host": spec.get("host"), "state": "running", "attempt": attempt,
            "created_at": spec.get("created_at"), "started_at": time.time(), "ended_at": None,
            "current": None, "reason": None, "server": None,
            "variants": [{"state": "pending", **old[v["name"]]} for v in spec["variants"]]}

    def variant(self, vi: int, **fields: Any) -> None:
        self.data["variants"][vi].update(fields)
        self.write()

    def set(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def write(self) -> None:
        self.data["updated_at"] = time.time()
        write_json(self.path, self.data)


def launch_spec(launch: Dict[str, Any]) -> LaunchSpec:
    """A variant's server start as an object: ``launch.spec`` (this version's campaign specs),
    or ``launch.agent_args`` (the argv a spec written before carried; read by the agent's own
    parser, so a campaign started by an older console still resumes)."""
    if "spec" in launch:
        return LaunchSpec.from_json(launch["spec"])
    return LaunchSpec.from_args(build_parser((server,)).parse_args(
        [str(a) for a in launch["agent_args"]]))


def _target_spec(tgt: Dict[str, Any]) -> bench.TargetSpec:
    """The variant's server (host/target.py's ``find``) as the bench calls take it."""
    return bench.TargetSpec(str(tgt["url"]), tgt.get("model") or None,
                            tgt.get("api_key_env") or None)


def prior_state(journal_path: str) -> Dict[str, Any]:
    """From an existing journal: attempts so far, finished variants, runs left open."""
    attempt = 0
    ended_variants: Dict[int, str] = {}
    open_runs: Dict[str, Dict[str, Any]] = {}
    runs: Dict[int, List[str]] = {}
    finished: List[Tuple[int, int]] = []  # (variant, repeat) whose run ended done / partial
    for ev in events(journal_path):
        kind = ev.get("type")
        if kind in ("campaign_start", "campaign_resume"):
            attempt = int(ev.get("attempt") or 0)
        elif kind == "run_start":
            open_runs[str(ev.get("run"))] = ev
            runs.setdefault(int(ev.get("variant") or 0), []).append(str(ev.get("run")))
        elif kind == "run_end":
            started = open_runs.pop(str(ev.get("run")), None)
            if started is not None and ev.get("status") in ("done", "partial"):
                finished.append((int(started.get("variant") or 0),
                                 int(started.get("repeat") or 0)))
        elif kind == "variant_end" and ev.get("state") in ("done", "partial", "failed",
                                                            "skipped"):
            ended_variants[int(ev.get("variant") or 0)] = str(ev.get("state"))
    return {"attempt": attempt, "ended": ended_variants, "open_runs": open_runs, "runs": runs,
            "finished": finished}


def _start_waiting_for_the_server_lock(spec: LaunchSpec, wait_s: float = 30.0) -> None:
    """``server start``; while another command holds the server lock (a stop or status of
    another console's that got there first), wait for it rather than fail the variant."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            server.start_launch(spec)
            return
        except protocol.AgentError as err:
            if err.kind != "busy" or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


class Campaign:
    def __init__(self, cdir: str, spec: Dict[str, Any], sampler: GpuSampler,
                 resume: bool) -> None:
        self.cdir = cdir
        self.spec = spec
        self.sampler = sampler
        self.resume = resume
        self.journal_path = os.path.join(cdir, "journal.jsonl")
        self.prior: Dict[str, Any] = prior_state(self.journal_path) if resume else {
            "attempt": 0, "ended": {}, "open_runs": {}, "runs": {}}
        self.attempt = self.prior["attempt"] + (1 if resume else 0)
        self.status = Status(os.path.join(cdir, "status.json"), spec, self.attempt,
                             read_json(os.path.join(cdir, "status.json")) if resume else None,
                             self.prior if resume else None)
        self.started_server: Optional[int] = None
        self.open_run: Optional[str] = None  # the run whose run_end is still to come
        self.canaries: Dict[int, Dict[str, Any]] = {}  # variant -> its canary summary
        self.step: Optional[slurm_step.JobStep] = None  # a Slurm host: the variant's job step

    # the journal's context: which variant / launch / run the events that follow belong to
    def _ctx(self, **fields: Any) -> None:
        protocol.context = {k: v for k, v in fields.items() if v is not None}

    def run(self) -> str:
        spec = self.spec
        if self.resume:
            protocol.emit("campaign_resume", id=spec["id"], attempt=self.attempt)
            for key, ev in self.prior["open_runs"].items():
                protocol.emit("run_end", run=key, variant=ev.get("variant"),
                              status="interrupted", reason="the campaign runner stopped "
                              "before this run finished (resumed: the variant runs again)")
        else:
            protocol.emit("campaign_start", id=spec["id"], name=spec.get("name"),
                          kind=spec.get("kind", "campaign"), attempt=0,
                          variants=[{"name": v["name"], "label": v.get("label"),
                                     "restart": bool(v.get("launch"))}
                                    for v in spec["variants"]],
                          repeats=spec.get("repeats", 1), plan=spec.get("plan"),
                          on_failure=spec.get("on_failure", "skip"))
        state, reason = "done", None
        try:
            if spec.get("schedule"):  # repeats with a restart each, in the plan's order
                state, reason = self._scheduled(spec["schedule"])
            for vi, variant in enumerate(spec["variants"] if not spec.get("schedule") else []):
                if vi in self.prior["ended"]:
                    if self.prior["ended"][vi] == "failed" and spec.get("on_failure") == "stop":
                        state, reason = "failed", "variant %s had failed (on_failure = stop)" \
                            % variant["name"]
                        for later in range(vi + 1, len(spec["variants"])):
                            if later not in self.prior["ended"]:
                                self._variant_end(later, "skipped", "the campaign stopped "
                                                  "(on_failure = stop)", [])
                        break
                    continue
                vstate, vreason = self.variant(vi, variant)
                if vstate == "failed" and spec.get("on_failure") == "stop":
                    state, reason = "failed", "stopped after variant %s failed: %s" % (
                        variant["name"], vreason)
                    for later in range(vi + 1, len(spec["variants"])):
                        self._variant_end(later, "skipped", "the campaign stopped (on_failure "
                                          "= stop)", [])
                    break
        except Cancelled:
            state, reason = "cancelled", "cancelled"
            for later, v in enumerate(self.status.data["variants"]):
                if v.get("state") == "pending":
                    self._variant_end(later, "skipped", "not run: the campaign was "
                                      "cancelled", [])
        self._ctx()
        if spec.get("stop_server"):
            self._stop_server()
        server_note = self._server_note()
        states = [v.get("state") for v in self.status.data["variants"]]
        protocol.emit("campaign_end", state=state, reason=reason, server=server_note,
                      variants=[{"name": v["name"], "state": v.get("state"),
                                 "reason": v.get("reason"), "runs": v.get("runs")}
                                for v in self.status.data["variants"]],
                      failed=sum(1 for s in states if s == "failed"))
        self.status.set(state=state, reason=reason, ended_at=time.time(), current=None,
                        server=server_note)
        return state

    def end_open_run(self, status: str, reason: str) -> None:
        """The run in progress when the runner stops early: its run_end, so no run is left
        ``running`` in the journal."""
        if self.open_run is not None:
            self._end_run(self.open_run, status, reason)

    def _stop_server(self) -> None:
        """``stop_server = true``: the server we started goes when the campaign ends (on a
        Slurm host always: the last variant's job step, before the allocation ends)."""
        if self.step is not None:
            self._stop_step()
            return
        st = server_state.read_state()
        if not server_state.ours_alive(st):
            return
        assert st is not None
        try:
            with detach.signals_deferred(), server_state.ServerLock("stop"):
                protocol.emit("stopped", **server.stop_server(
                    st, float(self.spec.get("grace_s") or 60.0), server.DEFAULT_GPU_WAIT_S))
        except protocol.AgentError as err:
            protocol.emit("notice", kind="stop_failed", message="could not stop the server "
                          "at the end: %s" % err.message)

    def _stop_step(self) -> None:
        """The running variant's job step: ``scancel`` of the step, confirmed (``stopped``)."""
        if self.step is None:
            return
        step, self.step = self.step, None
        with detach.signals_deferred():
            ev = step.stop()
        protocol.emit("stopped", **ev)

    def _server_note(self) -> Dict[str, Any]:
        if self.spec.get("slurm"):  # the job steps end with the allocation, the runner's job
            return {"running": False, "pid": None, "at": time.time(),
                    "started_by_campaign": True, "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                    "text": "when it ended, its last job step was stopped (scancel); Slurm job "
                    "%s ends with the campaign" % os.environ.get("SLURM_JOB_ID")}
        st = server_state.read_state()
        alive = server_state.ours_alive(st)
        return {"running": alive, "pid": (st or {}).get("pid") if alive else None,
                "started_by_campaign": self.started_server is not None, "at": time.time(),
                "text": ("when it ended, the server (pid %s) was left running"
                         % st.get("pid") if alive and st else  # type: ignore[union-attr]
                         "when it ended, no server of ours was running")}

    def _variant_end(self, vi: int, state: str, reason: Optional[str],
                     lines: List[str]) -> None:
        self._ctx(variant=vi)
        protocol.emit("variant_end", variant=vi, name=self.spec["variants"][vi]["name"],
                      state=state, reason=reason, error_lines=lines[-20:])
        self.status.variant(vi, state=state, reason=reason, error_lines=lines[-20:],
                            ended_at=time.time())

    def variant(self, vi: int, variant: Dict[str, Any]) -> Tuple[str, Optional[str]]:
        self._ctx(variant=vi)
        protocol.emit("variant_start", variant=vi, name=variant["name"],
                      label=variant.get("label"), attempt=self.attempt,
                      restart=bool(variant.get("launch")))
        self.status.set(current={"variant": vi, "phase": "starting"})
        self.status.variant(vi, started_at=time.time())
        try:
            state, reason, lines = self._variant(vi, variant)
        except (KeyboardInterrupt, Cancelled):
            self.end_open_run("cancelled", "cancelled")
            self._variant_end(vi, "cancelled", "cancelled", [])
            raise Cancelled() from None
        self._variant_end(vi, state, reason, lines)
        return state, reason

    def _scheduled(self, schedule: List[List[int]]) -> Tuple[str, Optional[str]]:
        """``repeats = k`` in a campaign: every (variant, repeat) of the plan's order
        (interleaved A1 B1 A2 B2 ..., blocked or randomized blocks) restarts the server, so
        each repeat is a fresh process (the run-to-run spread a verdict needs). A variant
        starts at its first repeat and ends after its last, or at the first that fails."""
        spec, variants = self.spec, self.spec["variants"]
        last = {vi: r for vi, r in schedule}
        done = set(self.prior.get("finished") or ())
        worst: Dict[int, str] = {}
        try:
            for vi, r in schedule:
                variant = variants[vi]
                if vi in self.prior["ended"] or (vi, r) in done:
                    continue
                if self.status.data["variants"][vi].get("state") in (*ENDED, "skipped"):
                    continue
                if vi not in worst:
                    self._ctx(variant=vi)
                    protocol.emit("variant_start", variant=vi, name=variant["name"],
                                  label=variant.get("label"), attempt=self.attempt,
                                  restart=bool(variant.get("launch")), repeats=last[vi] + 1)
                    self.status.variant(vi, started_at=time.time())
                    worst[vi] = "done"
                self.status.set(current={"variant": vi, "repeat": r, "phase": "starting"})
                status, why, lines = self._repeat(vi, variant, r)
                if status == "cancelled":
                    raise Cancelled()
                if status == "failed":
                    self._variant_end(vi, "failed", why, lines)
                    if spec.get("on_failure") == "stop":
                        for later, v in enumerate(self.status.data["variants"]):
                            if v.get("state") not in (*ENDED, "skipped"):
                                self._variant_end(later, "skipped", "the campaign stopped "
                                                  "(on_failure = stop)", [])
                        return "failed", "stopped after variant %s failed: %s" % (
                            variant["name"], why)
                    continue
                if status != "done":
                    worst[vi] = "partial"
                if r == last[vi]:
                    self._variant_end(vi, worst[vi], None if worst[vi] == "done" else
                                      "a run did not complete every request", [])
        except (KeyboardInterrupt, Cancelled):
            self.end_open_run("cancelled", "cancelled")
            for vi in worst:
                if self.status.data["variants"][vi].get("state") not in (*ENDED, "skipped"):
                    self._variant_end(vi, "cancelled", "cancelled", [])
            raise Cancelled() from None
        return "done", None

    def _repeat(self, vi: int, variant: Dict[str, Any], r: int
                ) -> Tuple[str, Optional[str], List[str]]:
        """One repeat of a variant: restart, find the server, sanity, sweep."""
        launch_key = None
        if variant.get("launch"):
            why, lines, launch_key = self._launch(vi, variant, "v%d.r%d.a%d" % (
                vi, r, self.attempt))
            if why is not None:
                return "failed", why, lines
        self._ctx(variant=vi)
        try:
            tgt = target.find(variant.get("target") or {"mode": "ours"})
        except protocol.AgentError as err:
            return "failed", err.message, []
        if tgt.get("notice"):
            protocol.emit("notice", kind="foreign_server", message=tgt["notice"])
        return self._run(vi, variant, r, "v%d.r%d.a%d" % (vi, r, self.attempt), tgt,
                         target.describe(tgt), launch_key)

    def _launch(self, vi: int, variant: Dict[str, Any], key: Optional[str] = None
                ) -> Tuple[Optional[str], List[str], Optional[str]]:
        """Restart the server for this variant: ``(failure reason, error lines, launch key)``."""
        launch = variant["launch"]
        key = key or "v%d.a%d" % (vi, self.attempt)
        self._ctx(variant=vi, launch=key)
        self.status.variant(vi, state="restarting")
        if launch.get("slurm_step"):
            return self._launch_step(vi, variant, key)
        protocol.emit("launch_start", launch=key, variant=vi, profile_name=launch.get(
            "profile_name"), backend=launch.get("backend"), checkpoint=launch.get("checkpoint"),
            changes=launch.get("changes"), argv=server.redact(launch.get("argv") or []),
            profile=launch.get("profile"))
        start = launch_spec(launch)
        t0 = time.time()
        try:
            _start_waiting_for_the_server_lock(start)
        except protocol.AgentError as err:
            lines = [str(x) for x in err.details.get("last_errors") or []]
            tail = [str(x) for x in err.details.get("tail") or []]
            protocol.emit("launch_end", launch=key, ok=False, kind=err.kind, error=err.message,
                          last_errors=lines, tail=tail[-20:],
                          elapsed_s=round(time.time() - t0, 3))
            st = server_state.read_state()
            if st and st.get("started_at", 0) >= t0:
                self.started_server = st.get("pid")
            retry = self._suggested(variant, key, err.details.get("failure"))
            if retry is not None:  # on_failure = "retry-suggested": the next move, once
                return self._launch(vi, retry, key + ".retry")
            return "startup failed: %s" % err.message, lines or tail[-10:], key
        except KeyboardInterrupt:
            protocol.emit("launch_end", launch=key, ok=False, kind="cancelled",
                          error="cancelled while the server was starting (it keeps starting)",
                          elapsed_s=round(time.time() - t0, 3))
            raise Cancelled() from None
        st = server_state.read_state() or {}
        self.started_server = st.get("pid")
        phases = server.status_fields(st, http=False).get("phases") if st else None
        protocol.emit("launch_end", launch=key, ok=True, pid=st.get("pid"), phases=phases,
                      started_at=st.get("started_at"),
                      argv=st.get("argv"), startup_s=server_state.startup_s(st) or round(
                          time.time() - float(st.get("started_at") or t0), 3),
                      elapsed_s=round(time.time() - t0, 3))
        return None, [], key

    def _launch_step(self, vi: int, variant: Dict[str, Any], key: str
                     ) -> Tuple[Optional[str], List[str], Optional[str]]:
        """A Slurm host: the previous variant's job step stopped (confirmed), this variant's
        ranks started as a step of the same allocation, until node 0 answers; the sweep then
        aims at node 0's port (the variant's target)."""
        launch = variant["launch"]
        job = slurm_step.job_id()
        self._stop_step()
        profile = dict(launch.get("profile") or {}, slurm_job_id=job)
        protocol.emit("launch_start", launch=key, variant=vi, profile_name=launch.get(
            "profile_name"), backend=launch.get("backend"), checkpoint=launch.get("checkpoint"),
            changes=launch.get("changes"), argv=server.redact(launch.get("argv") or []),
            profile=profile)
        t0 = time.time()
        step = slurm_step.JobStep(job, self.cdir, key, launch["slurm_step"])
        try:
            step.start()
            self.step = step
            startup_s = step.wait_ready(float(launch.get("timeout") or 1800.0))
        except slurm_step.StepFailed as exc:
            failed = exc.failed or {}
            protocol.emit("launch_end", launch=key, ok=False, kind="crashed", error=exc.reason,
                          last_errors=exc.lines[-10:], tail=exc.lines[-20:],
                          elapsed_s=round(time.time() - t0, 3), slurm_job_id=job,
                          slurm_step="%s.%s" % (job, step.step_id), node=failed.get("node"),
                          failure=failed.get("failure"))
            self._stop_step()
            return "startup failed: %s" % exc.reason, exc.lines[-10:], key
        except KeyboardInterrupt:
            protocol.emit("launch_end", launch=key, ok=False, kind="cancelled",
                          error="cancelled while the job step was starting",
                          elapsed_s=round(time.time() - t0, 3))
            raise Cancelled() from None
        # this variant's server: node 0's port, reached from here (the runner is on node 0)
        variant["target"] = {"mode": "url", "url": step.url, "model": profile.get(
            "served_model_name") or profile.get("model_path")}
        protocol.emit("launch_end", launch=key, ok=True, started_at=step.started_at,
                      argv=server.redact(launch.get("argv") or []), startup_s=startup_s,
                      elapsed_s=round(time.time() - t0, 3), slurm_job_id=job,
                      slurm_step="%s.%s" % (job, step.step_id), url=step.url)
        return None, [], key

    def _step_meta(self, variant: Dict[str, Any], meta: Dict[str, Any]) -> Dict[str, Any]:
        """A run on a job step: what its launch ran (node 0's argv, the profile) and the job
        id and step, which the run store keeps with the run."""
        assert self.step is not None
        launch = variant.get("launch") or {}
        job, sid = self.step.job_id, "%s.%s" % (self.step.job_id, self.step.step_id)
        prof = dict(launch.get("profile") or {}, slurm_job_id=job, slurm_step=sid)
        return dict(meta, source="launch", argv=server.redact(launch.get("argv") or []),
                    profile=prof, profile_name=launch.get("profile_name"),
                    backend=launch.get("backend") or meta.get("backend"),
                    checkpoint=launch.get("checkpoint") or meta.get("checkpoint"),
                    slurm_job_id=job, slurm_step=sid)

    def _suggested(self, variant: Dict[str, Any], key: str, fail: Any
                   ) -> Optional[Dict[str, Any]]:
        """With ``on_failure = "retry-suggested"``, the variant with the failed start's next
        move applied (agent/host/failure.next_flag: one flag of the argv that ran), once;
        None when there is none (or this launch was the retry). ``launch_retry`` says it."""
        if self.spec.get("on_failure") != "retry-suggested" or key.endswith(".retry") \
                or not isinstance(fail, dict):
            return None
        launch = variant["launch"]
        argv = [str(a) for a in launch.get("argv") or []]
        move = next_flag(fail, argv)
        protocol.emit("launch_retry", launch=key, cause=fail.get("cause"),
                      failure_class=fail.get("class"), move=move,
                      retry=key + ".retry" if move else None)
        if move is None:
            return None
        new_argv = with_flag(argv, move["flag"], move["to"])
        start = launch_spec(launch)
        start.argv = with_flag(start.argv, move["flag"], move["to"])
        changes = dict(launch.get("changes") or {})
        changes[move["flag"]] = {"from": move["from"], "to": move["to"]}
        retry = {k: v for k, v in launch.items() if k != "agent_args"}
        return dict(variant, launch=dict(retry, argv=new_argv, spec=start.to_json(),
                                         changes=changes))

    def _variant(self, vi: int, variant: Dict[str, Any]
                 ) -> Tuple[str, Optional[str], List[str]]:
        spec = self.spec
        launch_key = None
        if variant.get("launch"):
            why, lines, launch_key = self._launch(vi, variant)
            if why is not None:
                return "failed", why, lines
        self._ctx(variant=vi)
        try:
            tgt = target.find(variant.get("target") or {"mode": "ours"})
        except protocol.AgentError as err:
            return "failed", err.message, []
        if tgt.get("notice"):
            protocol.emit("notice", kind="foreign_server", message=tgt["notice"])
        meta = target.describe(tgt)
        repeats = max(1, int(spec.get("repeats") or 1))
        worst = "done"
        for r in range(repeats):
            key = "v%d.r%d.a%d" % (vi, r, self.attempt)
            status, reason, lines = self._run(vi, variant, r, key, tgt, meta, launch_key)
            if status == "cancelled":
                raise Cancelled()
            if status == "failed":
                return "failed", reason, lines
            if status != "done":
                worst = "partial"
        return worst, None if worst == "done" else "a run did not complete every request", []

    def _run(self, vi: int, variant: Dict[str, Any], repeat: int, key: str,
             tgt: Dict[str, Any], meta: Dict[str, Any], launch_key: Optional[str]
             ) -> Tuple[str, Optional[str], List[str]]:
        spec = self.spec
        self._ctx(variant=vi, run=key)
        runs = self.status.data["variants"][vi].setdefault("runs", [])
        runs.append(key)
        self.status.variant(vi, state="sanity" if spec.get("cases") else "running")
        self.status.set(current={"variant": vi, "run": key, "phase": "sanity"})
        self.open_run = key
        if self.step is not None:  # every run says which job (and step) it measured
            meta = self._step_meta(variant, meta)
        protocol.emit("run_start", run=key, variant=vi, repeat=repeat,
                      label=variant.get("label") or variant["name"], plan=spec.get("plan"),
                      meta=meta, launch=launch_key, url=tgt["url"], model=tgt.get("model"),
                      allow_busy=bool((spec.get("plan") or {}).get("allow_busy")))
        cases = spec.get("cases")
        if cases:
            try:
                failed = bench.run_loop(bench.sanity_cases(
                    _target_spec(tgt), [dict(c) for c in cases],
                    float(spec.get("sanity_timeout_s") or 120)))
            except protocol.AgentError as err:
                return self._end_run(key, "failed", "sanity could not run: %s" % err.message)
            except KeyboardInterrupt:
                return self._end_run(key, "cancelled", "cancelled during the sanity check")
            if failed:
                return self._end_run(key, "failed", "sanity failed: %d of %d cases" % (
                    failed, len(cases)))
        if spec.get("canary") and repeat == 0:
            why = self._canary(vi, key, tgt)
            if why is not None:
                return self._end_run(key, "failed", why)
        self.status.variant(vi, state="running")
        self.status.set(current={"variant": vi, "run": key, "phase": "sweep"})
        key_env = tgt.get("api_key_env")
        sink = RunSink(self.sampler, str(tgt["url"]),
                       os.environ.get(str(key_env)) if key_env else None)
        try:
            plan = bench.checked_plan(dict(spec.get("plan") or {}))
            sweep = bench.run(plan, _target_spec(tgt), sink)
        except protocol.AgentError as err:
            return self._end_run(key, "failed", err.message)
        finally:
            sink.close()
        for lv in sink.levels:  # frames that arrived after each level's event
            gpus = self.sampler.summary(lv.get("started_at"), lv.get("finished_at"))
            if gpus:
                protocol.emit("level_gpus", level=lv.get("level"), gpus=gpus, final=True)
        status, reason, lines = sweep.status, sweep.reason, []
        if self.step is not None and not self.step.alive():  # a rank died: the step ended
            status, reason = "failed", "the job step %s.%s ended during the sweep (%s)" % (
                self.step.job_id, self.step.step_id, slurm_step.ended_text(
                    self.step.failed_rank(), self.step.proc.returncode
                    if self.step.proc is not None else None))
            lines = self.step.tail()
        elif tgt.get("ours"):
            st = server_state.read_state()
            if st is not None and not server_state.ours_alive(st):
                fields = server.status_fields(st)
                lines = [str(x) for x in fields.get("last_errors") or []]
                code = fields.get("exit_code")
                how = "exit code %s" % code if code is not None else (
                    "signal %s" % fields["signal"] if fields.get("signal") else "it is gone")
                status, reason = "failed", "the server died during the sweep (%s)%s" % (
                    how, ": " + str(fields.get("cause")) if fields.get("cause") else "")
        if status == "cancelled":
            return self._end_run(key, "cancelled", reason or "cancelled")
        ended = self._end_run(key, status if status in ("done", "partial", "failed") else
                              "failed", reason, lines)
        variant_kernels.after_run(spec, self.cdir, key, repeat, ended[0], tgt)  # kernels = {..}
        return ended

    def _canary(self, vi: int, key: str, tgt: Dict[str, Any]) -> Optional[str]:
        """The accuracy canary on this variant's first repeat, through the sanity path; its
        share against the baseline's (variant 0): ``canary_gate``. Returns why the sweep is
        skipped (a drop over the margin with ``on_drop = skip``), else None."""
        conf = dict(self.spec.get("canary") or {})
        self.status.set(current={"variant": vi, "run": key, "phase": "canary"})
        try:
            items = canary.load_items(conf["file"]) if conf.get("file") else \
                canary.builtin_items()
        except ValueError as exc:
            return "canary: %s" % exc
        try:
            got = bench.run_loop(bench.canary_items(
                _target_spec(tgt), items, int(conf.get("concurrency") or 8),
                int(conf.get("max_tokens") or 32), conf.get("file") or "built-in",
                float(self.spec.get("sanity_timeout_s") or 120)))
        except protocol.AgentError as err:
            return "canary could not run: %s" % err.message
        self.canaries[vi] = got
        base = self.canaries.get(0)
        if vi == 0 or base is None or not base.get("total") or not got.get("total"):
            return None
        drop = 100.0 * (float(base["share"]) - float(got["share"]))
        margin = float(conf["margin"]) if conf.get("margin") is not None else 5.0
        passed = drop <= margin
        action = conf.get("on_drop") or "mark"
        text = "canary %d/%d correct against the baseline's %d/%d: %+.1f points (margin %g)" % (
            got["correct"], got["total"], base["correct"], base["total"], -drop, margin)
        protocol.emit("canary_gate", variant=vi, passed=passed, drop_points=round(drop, 2),
                      margin=margin, action=action, text=text)
        if not passed and action == "skip":
            return text + "; the sweep is skipped (on_drop = skip)"
        return None

    def _end_run(self, key: str, status: str, reason: Optional[str],
                 lines: Optional[List[str]] = None) -> Tuple[str, Optional[str], List[str]]:
        self.open_run = None
        self._ctx(variant=(self.status.data.get("current") or {}).get("variant"), run=key)
        protocol.emit("run_end", run=key, status=status, reason=reason,
                      error_lines=(lines or [])[-20:])
        return status, reason, lines or []


# -- the process ------------------------------------------------------------------------------

def main(cdir: str, resume: bool, handshake_fd: Optional[int] = None) -> int:
    """The runner's body (in the forked, detached process)."""
    spec = read_json(os.path.join(cdir, "spec.json"))

    def handshake(reply: Dict[str, Any]) -> None:
        if handshake_fd is not None:
            try:
                os.write(handshake_fd, json.dumps(reply).encode())
                os.close(handshake_fd)
            except OSError:
                pass

    if spec is None:
        handshake({"error": {"kind": "not_found", "message": "no readable spec.json in %s"
                             % cdir}})
        return 2
    reserve = Reserve(os.path.join(cdir, "reserve"))
    short = room_to_run(cdir, reserve)
    if short is not None:
        handshake({"error": {"kind": "disk_full", "message": short}})
        return protocol.EXIT_FAILED
    info = {"id": spec["id"], "name": spec.get("name"), "kind": spec.get("kind", "campaign")}
    if not bench_lock.acquire(info):
        reserve.free()
        err = bench_lock.busy_error(bench_lock.holder(), "another campaign")
        handshake({"error": {"kind": err.kind, "message": err.message,
                             "holder": bench_lock.holder()}})
        return protocol.EXIT_BUSY
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    runner_path = os.path.join(cdir, "runner.json")
    record = {"pid": os.getpid(), "proc_start": procs.proc_start(os.getpid()),
              "started_at": time.time(), "state": "running", "resume": resume}
    submitted = read_json(runner_path) or {}
    if submitted.get("slurm_job_id"):  # a Slurm host: the runner is its job's payload
        record.update(slurm_job_id=submitted["slurm_job_id"], node=os.environ.get(
            "SLURMD_NODENAME"))
    try:
        write_json(runner_path, record)
        journal = Journal(os.path.join(cdir, "journal.jsonl"), reserve)
    except OSError as exc:
        bench_lock.release()
        if not disk_full(exc):
            raise
        reserve.free()
        handshake({"error": {"kind": "disk_full", "message": "host disk full: %s in %s; "
                             "nothing was started" % (exc.strerror, cdir)}})
        return protocol.EXIT_FAILED
    protocol.set_writer(journal.write)
    handshake({"ok": True, "pid": os.getpid()})
    sampler = GpuSampler(float(spec.get("telemetry_interval_s") or 1.0))
    sampler.start()
    state = "failed"
    camp: Optional[Campaign] = None
    try:
        camp = Campaign(cdir, spec, sampler, resume)
        state = camp.run()
    except BaseException as exc:  # the journal says how it ended, then the runner is gone
        if journal.full is not None or disk_full(exc):
            state = "interrupted"
            record["disk_full"] = _stopped_by_full_disk(
                journal, journal.full or journal.note_full(exc, _doing(exc)))
            return protocol.EXIT_FAILED
        cancelled = isinstance(exc, KeyboardInterrupt)
        state = "cancelled" if cancelled else "failed"
        reason = "cancelled" if cancelled else "the runner failed: %s: %s" % (
            type(exc).__name__, exc)
        with detach.signals_deferred():
            if camp is not None:
                camp.end_open_run(state, reason)
            protocol.context = {}
            protocol.emit("campaign_end", state=state, reason=reason)
            if camp is not None:
                camp.status.set(state=state, reason=reason, ended_at=time.time(), current=None)
        if not cancelled:
            raise
    finally:
        sampler.stop()
        protocol.set_writer(None)
        journal.close()
        record.update(state=state, ended_at=time.time())
        try:
            write_json(runner_path, record)
        except OSError:
            if not record.get("disk_full"):
                raise
        finally:
            bench_lock.release()
            reserve.free()
    return 0


def room_to_run(cdir: str, reserve: Reserve) -> Optional[str]:
    """Why the disk has no room for a runner (None when it has): its reserve, and
    MIN_FREE_BYTES besides, must fit."""
    free = free_bytes(cdir)
    if free is None or free >= MIN_FREE_BYTES + RESERVE_BYTES:
        try:
            reserve.make()
            return None
        except OSError as exc:
            if not disk_full(exc):
                raise
            free = free_bytes(cdir)
    return ("host disk full: %s free in %s, a campaign runner needs at least %s; nothing was "
            "started (free space on the host, then try again)" % (
                size_text(free), cdir, size_text(MIN_FREE_BYTES + RESERVE_BYTES)))


def _doing(exc: BaseException) -> str:
    name = os.path.basename(str(getattr(exc, "filename", None) or ""))
    if name.endswith(".tmp"):  # write_json's copy: say the file it was for
        name = name.rsplit(".", 2)[0]
    return "writing %s" % name if name else "writing its files"


def _stopped_by_full_disk(journal: Journal, reason: str) -> str:
    """The disk is full: the runner's last words, with the room its reserve gave back: an
    event the console reads (the journal's last line), a line in runner.log. The campaign
    stays resumable (no campaign_end): what finished is in the journal."""
    with detach.signals_deferred():
        protocol.context = {}
        try:
            journal.write(protocol.make_event(
                "notice", kind="disk_full", message=reason + "; the campaign runner stopped "
                "here, everything before this line is in the journal"), last=True)
        except OSError:
            pass
        try:
            print("dsv4tui campaign runner (pid %d): %s; stopped" % (os.getpid(), reason),
                  file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
    return reason
