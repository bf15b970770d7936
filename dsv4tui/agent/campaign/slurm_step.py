"""A variant's server as one job step of the campaign's allocation (a Slurm host).

The campaign runner runs inside the job, on node 0 (:mod:`slurm_job`). Each variant starts its
SGLang ranks with ``srun --jobid J --overlap --kill-on-bad-exit=1 --nodes N
--ntasks-per-node=1`` (one task a node, the rank from ``SLURM_NODEID``, node 0's address from
the batch script's ``DSV4TUI_HEAD_ADDR``; the task body is the console's,
core/launchers/slurm.step_body), waits until node 0 answers ``/health``, and is stopped with
``scancel J.S`` of its step, confirmed by the step leaving ``squeue -s`` and srun exiting,
before the next variant's step starts. The load comes from the runner, next to node 0's port.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Any, Dict, List, Optional

from dsv4tui.agent import protocol
from dsv4tui.agent.campaign.slurm_job import run
from dsv4tui.agent.host import failure, health
from dsv4tui.agent.host.server import parse_log

# the line each rank's log ends with (core/launchers/slurm._rank_case writes it)
RANK_END_RE = re.compile(r"dsv4tui: rank (\d+) on (\S+) exited with status (\d+) at ([\d.]+)")
SRUN_ERROR_RE = re.compile(r"srun: error: (\S+): task (\d+): (.+)")
STEP_FIND_S = 60.0
STOP_WAIT_S = 120.0


class StepFailed(Exception):
    """The step ended (a rank died, srun refused) or never answered before its timeout."""

    def __init__(self, reason: str, lines: List[str],
                 failed: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lines = lines
        self.failed = failed  # JobStep.failed_rank: node, rank, status, failure class


def head_addr(var: str) -> str:
    """Node 0's address: the batch script's export, else the job's first node."""
    addr = os.environ.get(var)
    if addr:
        return addr
    nodes = run(["scontrol", "show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", "")])
    first = (nodes.stdout.split() or [""])[0] if nodes.returncode == 0 else ""
    return first or "127.0.0.1"


def steps(job_id: str) -> List[Dict[str, str]]:
    """The job's steps now (``squeue -s``): id and name."""
    out = run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i|%j"], timeout=20.0)
    found = []
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        sid, _, name = line.strip().partition("|")
        if sid:
            found.append({"id": sid, "name": name})
    return found


class JobStep:
    """One variant's ranks as a step of job ``job_id``: start, ready, stop (confirmed)."""

    def __init__(self, job_id: str, cdir: str, key: str, step: Dict[str, Any]) -> None:
        self.job_id = str(job_id)
        self.cdir = cdir
        self.key = key
        self.step = step
        self.name = "dsv4tui-%s" % key
        self.addr = head_addr(str(step.get("head_var") or "DSV4TUI_HEAD_ADDR"))
        self.port = int(step.get("port") or 30000)
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.step_id: Optional[str] = None
        self.srun_log = os.path.join(cdir, "srun-%s.log" % key)
        self.started_at: Optional[float] = None

    @property
    def url(self) -> str:
        return "http://[%s]:%d" % (self.addr, self.port) if ":" in self.addr else \
            "http://%s:%d" % (self.addr, self.port)

    def rank_logs(self) -> List[str]:
        stem = str(self.step.get("log_stem") or "server")
        return [os.path.join(self.cdir, "%s-%s.%s-node%d.log" % (
            stem, self.job_id, self.step_id or "?", n)) for n in range(int(self.step["nodes"]))]

    def argv(self) -> List[str]:
        stem = str(self.step.get("log_stem") or "server")
        return ["srun", "--jobid=%s" % self.job_id, "--overlap", "--kill-on-bad-exit=1",
                "--nodes=%d" % int(self.step["nodes"]), "--ntasks-per-node=1",
                "--job-name=%s" % self.name,
                "--output=%s" % os.path.join(self.cdir, stem + "-%j.%s-node%n.log"),
                "bash", "-c", str(self.step["body"])]

    def start(self) -> None:
        env = dict(os.environ)
        env[str(self.step.get("head_var") or "DSV4TUI_HEAD_ADDR")] = self.addr
        self.started_at = time.time()
        with open(self.srun_log, "ab") as log:
            try:
                self.proc = subprocess.Popen(self.argv(), env=env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True, close_fds=True)
            except OSError as exc:
                raise StepFailed("srun could not start: %s" % exc, []) from None
        deadline = time.monotonic() + STEP_FIND_S
        while self.step_id is None:
            for st in steps(self.job_id):
                if st["name"] == self.name:
                    self.step_id = st["id"].split(".", 1)[-1]
            if self.step_id is None:
                if self.proc.poll() is not None:
                    raise StepFailed("srun ended at once (exit code %s)" % self.proc.returncode,
                                     self.tail())
                if time.monotonic() > deadline:
                    raise StepFailed("the step did not appear in squeue in %g s" % STEP_FIND_S,
                                     self.tail())
                time.sleep(0.3)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = 20) -> List[str]:
        out: List[str] = []
        for path in [self.srun_log, *self.rank_logs()]:
            try:
                with open(path, "rb") as fh:
                    lines = fh.read()[-16384:].decode("utf-8", "replace").splitlines()
            except OSError:
                continue
            tag = os.path.basename(path)
            out += ["[%s] %s" % (tag, ln) for ln in lines[-n:]]
        return out

    def failed_rank(self) -> Optional[Dict[str, Any]]:
        """The rank that failed first and why: its node, status, and the failure class of
        its log (agent/host/failure.diagnose), as ``server status`` gives it on one host."""
        ends = []
        for path in self.rank_logs():
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()[-65536:]
            except OSError:
                continue
            for m in RANK_END_RE.finditer(text):
                if int(m.group(3)) != 0:
                    ends.append((float(m.group(4)), int(m.group(1)), m.group(2), int(m.group(3))))
        srun_first = None
        try:
            with open(self.srun_log, encoding="utf-8", errors="replace") as fh:
                srun_first = next((m for m in map(SRUN_ERROR_RE.search, fh) if m), None)
        except OSError:
            pass
        if srun_first is not None:  # srun names the first task that failed
            task = int(srun_first.group(2))
            said = [e for e in ends if e[1] == task]
            rank, node, status = task, srun_first.group(1), said[0][3] if said else None
        elif ends:
            _, rank, node, status = min(ends)
        else:
            return None
        info = parse_log(self.rank_logs()[rank], [])
        diag = failure.diagnose(info["events"], info["parser"],
                                status if status is not None and status < 128 else None,
                                status - 128 if status is not None and status > 128 else None)
        return {"node": node, "rank": rank, "status": status, "failure": diag}

    def wait_ready(self, timeout: float) -> float:
        """Until node 0 answers ``/health`` (every rank joined: SGLang's node 0 serves only
        then); its startup seconds. StepFailed when the step ends first or the time is up."""
        assert self.proc is not None and self.started_at is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                who = self.failed_rank()
                raise StepFailed("the job step %s.%s ended before ready (%s)" % (
                    self.job_id, self.step_id, ended_text(who, self.proc.returncode)),
                    self.tail(), who)
            if health.health(self.port, self.addr, timeout=2.0).get("status") == 200:
                return round(time.time() - self.started_at, 3)
            if time.monotonic() > deadline:
                raise StepFailed("node 0 did not answer %s/health in %g s" % (self.url, timeout),
                                 self.tail())
            time.sleep(0.5)

    def stop(self, wait_s: float = STOP_WAIT_S) -> Dict[str, Any]:
        """``scancel J.S``; confirmed once the step has left the queue and srun has exited."""
        t0 = time.monotonic()
        sid = "%s.%s" % (self.job_id, self.step_id)
        errors = []
        if self.step_id is not None and self.alive():
            done = run(["scancel", sid])
            if done.returncode != 0:
                errors.append("scancel %s: %s" % (sid, (done.stderr or done.stdout).strip()))
        while time.monotonic() - t0 < wait_s:
            listed = any(st["id"] == sid for st in steps(self.job_id))
            if not listed and not self.alive():
                break
            time.sleep(0.3)
        else:
            errors.append("step %s still there %g s after scancel" % (sid, wait_s))
            if self.proc is not None and self.alive():
                self.proc.kill()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        out: Dict[str, Any] = {"how": "scancelled", "slurm_job_id": self.job_id,
                               "slurm_step": sid, "confirmed": not errors,
                               "stop_s": round(time.monotonic() - t0, 2)}
        if errors:
            out["errors"] = errors
        return out


def ended_text(who: Optional[Dict[str, Any]], srun_code: Optional[int]) -> str:
    """``node node1 (rank 1) status 137: killed by SIGKILL ...`` or srun's exit code."""
    if who is None:
        return "srun exit code %s" % srun_code
    text = "node %s (rank %s) status %s" % (who["node"], who["rank"], who["status"])
    diag = who.get("failure")
    return text + (": %s" % diag["cause"] if diag else "")


def job_id() -> str:
    """The allocation the runner is in (``SLURM_JOB_ID``); an error outside a job."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        raise protocol.AgentError("slurm", "a Slurm campaign's runner runs inside its job "
                                  "(no SLURM_JOB_ID here)")
    return job
