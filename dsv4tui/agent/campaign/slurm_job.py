"""A campaign on a Slurm host: its runner as the payload of one batch job.

``campaign start`` / ``resume`` on a Slurm login node submit the campaign's sbatch script (the
console renders it: core/launchers/slurm.campaign_script, the host's ``slurm`` table) with one
line appended that runs this agent's ``campaign run-job DIR`` there: the runner lives inside the
allocation, on its first node (node 0, where the batch script runs), and each variant's SGLang
ranks are a job step of that same allocation (:mod:`slurm_step`), so no variant waits in the
queue again. ``runner.json`` holds the job id from the submit on; the runner is alive while the
job is in the queue (``squeue``), which the login node can tell although the runner's pid is on
another machine. Cancel is ``scancel --batch --signal=TERM`` (the runner ends as on SIGTERM),
or ``scancel`` of a job still queued.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from typing import Any, Dict, List, Optional

from dsv4tui.agent import protocol

ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "RESIZING", "SIGNALING", "STAGE_OUT")


def run(argv: List[str], timeout: float = 30.0) -> "subprocess.CompletedProcess[str]":
    """A Slurm command (an argv list); a missing command or a hang is an AgentError."""
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError:
        raise protocol.AgentError("slurm", "%s is not on this host's PATH (a Slurm host's "
                                  "login node needs Slurm's commands)" % argv[0]) from None
    except subprocess.TimeoutExpired:
        raise protocol.AgentError("slurm", "%s did not answer in %g s" % (argv[0], timeout)
                                  ) from None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def job_state(job_id: str) -> Optional[str]:
    """The job's state as ``squeue`` shows it; None once it left the queue; ``UNKNOWN`` when
    squeue cannot say (the controller does not answer): treated as still there."""
    try:
        out = run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], timeout=20.0)
    except protocol.AgentError:
        return "UNKNOWN"
    if out.returncode != 0:
        if "Invalid job id" in out.stderr:
            return None
        return "UNKNOWN"
    state = out.stdout.strip().split("\n")[0].strip()
    return state or None


_SEEN: Dict[str, Any] = {}  # job id -> (monotonic time, active): one squeue a second at most
ASK_EVERY_S = 1.0


def active(job_id: str) -> bool:
    """In the queue (any active state); asked of squeue at most once a second per job (the
    journal's follower asks after every read)."""
    now = time.monotonic()
    seen = _SEEN.get(job_id)
    if seen is not None and now - seen[0] < ASK_EVERY_S:
        return bool(seen[1])
    state = job_state(job_id)
    got = state is not None and (state in ACTIVE or state == "UNKNOWN")
    _SEEN[job_id] = (now, got)
    return got


def submit(cdir: str, spec: Dict[str, Any], agent: List[str], resume: bool) -> str:
    """Write the campaign's batch script (the console's, plus the line that runs the runner)
    into ``cdir`` and ``sbatch --parsable`` it; the job id."""
    slurm = spec.get("slurm") or {}
    script = str(slurm.get("script") or "#!/bin/bash\n")
    runner = [*agent, "campaign", "run-job", cdir] + (["--resume"] if resume else [])
    script += "exec " + " ".join(shlex.quote(a) for a in runner) + "\n"
    path = os.path.join(cdir, "runner-%d.sbatch" % int(time.time() * 1000))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(script)
    out = run(["sbatch", "--parsable", "--output=" + os.path.join(cdir, "runner.log"),
               "--open-mode=append", "--chdir=" + cdir, path], timeout=60.0)
    if out.returncode != 0:
        raise protocol.AgentError("slurm", "sbatch refused the campaign's job: %s" % _last_line(
            out.stderr or out.stdout))
    job = out.stdout.strip().split(";")[0].strip()
    if not job.isdigit():
        raise protocol.AgentError("slurm", "sbatch did not print a job id (%r)" % _last_line(
            out.stdout))
    return job


def cancel(job_id: str, queued: bool) -> None:
    """SIGTERM to the runner (the batch step: it ends as ``campaign cancel`` asks, the variant
    it ran recorded as cancelled), or, for a job not running yet, the job itself."""
    argv = ["scancel", str(job_id)] if queued else \
        ["scancel", "--batch", "--signal=TERM", str(job_id)]
    out = run(argv)
    if out.returncode != 0:
        raise protocol.AgentError("cancel", "%s failed: %s" % (" ".join(argv), _last_line(
            out.stderr or out.stdout)))
