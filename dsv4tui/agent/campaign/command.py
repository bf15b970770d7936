"""``campaign start|follow|status|list|cancel|resume``: campaigns that run on the host by
themselves (:mod:`campaign_runner`), and the journal the console reads back.

State lives in ``<cache dir>/campaigns/<ID>/``: ``spec.json`` (what the console asked for:
variants with their launch argv, target, sweep plan, sanity cases), ``journal.jsonl`` (every
event, the truth), ``status.json`` (a summary), ``runner.json`` (the runner's pid and end
state) and ``runner.log`` (its stderr).

- start: validates the spec, creates the directory, forks the runner into its own session and
  waits for it to hold the host's bench lock; ``campaign_started`` (id, pid) or ``busy``.
- follow ID --offset N: the journal's lines from byte N as they are written (each line is an
  event), ``journal_pos`` after each batch of at most ``FOLLOW_CHUNK_EVENTS`` events (the
  byte offset the console may store), a
  ``journal_torn`` for a line that is not an event, and ``journal_end`` (state: done, failed,
  cancelled, interrupted, or running with ``--no-wait``) at the end.
- status / list: ``campaign`` events; a runner that is gone without ending is ``interrupted``.
- cancel: SIGTERM to the runner (checked by pid and start time), waits for it to end.
- resume: a new runner for an interrupted campaign; what finished is kept.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import time
from typing import Any, Dict

from dsv4tui.agent import detach, protocol
from dsv4tui.agent.campaign import slurm_job, variant_kernels
from dsv4tui.agent.campaign.journal import disk_full, free_bytes, read_lines, size_text
from dsv4tui.agent.campaign.runner import ENDED, read_json, write_json
from dsv4tui.agent.host import bench_lock, procs, server_state
from dsv4tui.agent.host.launch_spec import LaunchSpec
from dsv4tui.agent.state import cache_dir

_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
SPEC_VERSION = 1
# ``follow`` says where it is (``journal_pos``, the offset the console stores with the rows
# before it, in one transaction) after at most this many events: a console killed mid-ingest
# attaches again from its last chunk, not from byte 0 of a long journal.
FOLLOW_CHUNK_EVENTS = 5000


def campaigns_dir() -> str:
    path = str(cache_dir() / "campaigns")
    os.makedirs(path, exist_ok=True)
    return path


def _dir(cid: str) -> str:
    if not _ID.match(cid or ""):
        raise protocol.AgentError("usage", "not a campaign id: %r" % cid, protocol.EXIT_USAGE)
    path = os.path.join(campaigns_dir(), cid)
    if not os.path.isdir(path):
        raise protocol.AgentError("not_found", "no campaign %s on this host (dsv4tui campaign "
                                  "list HOST)" % cid, protocol.EXIT_USAGE)
    return path


def _usage(message: str) -> protocol.AgentError:
    return protocol.AgentError("usage", message, protocol.EXIT_USAGE)


def check_spec(spec: Any) -> Dict[str, Any]:
    """The console validated the spec; this re-checks what the runner relies on."""
    if not isinstance(spec, dict):
        raise _usage("the campaign spec must be a JSON object")
    if spec.get("v") != SPEC_VERSION:
        raise _usage("campaign spec version %r; this agent reads version %d (update dsv4tui "
                     "on both sides)" % (spec.get("v"), SPEC_VERSION))
    variants = spec.get("variants")
    if not isinstance(variants, list) or not variants:
        raise _usage("a campaign needs at least one variant")
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or not v.get("name"):
            raise _usage("variant %d has no name" % i)
        launch = v.get("launch")
        if launch is None:
            continue
        if not isinstance(launch, dict):
            raise _usage("variant %s: launch must be a JSON object" % v["name"])
        if "slurm_step" in launch:  # a Slurm host: the ranks as a step of the campaign's job
            step = launch["slurm_step"]
            if not (isinstance(step, dict) and isinstance(step.get("body"), str)
                    and isinstance(step.get("nodes"), int) and step["nodes"] > 0):
                raise _usage("variant %s: launch.slurm_step needs a body and nodes" % v["name"])
            if not isinstance((spec.get("slurm") or {}).get("script"), str):
                raise _usage("variant %s runs as a Slurm job step, but the spec has no "
                             "slurm.script" % v["name"])
        elif "spec" in launch:  # this version's: the server start as an object
            LaunchSpec.from_json(launch["spec"])
        elif not (isinstance(launch.get("agent_args"), list) and all(
                isinstance(a, str) for a in launch["agent_args"])):  # a spec written before
            raise _usage("variant %s: launch has neither a spec nor agent_args (a list of "
                         "strings)" % v["name"])
    if not isinstance(spec.get("plan"), dict):
        raise _usage("the campaign spec has no sweep plan")
    if spec.get("on_failure", "skip") not in ("skip", "stop", "retry-suggested"):
        raise _usage("on_failure must be skip, stop or retry-suggested")
    if spec.get("kernels") is not None:
        try:
            variant_kernels.check(spec["kernels"], spec["plan"])
        except ValueError as exc:
            raise _usage(str(exc)) from None
    return spec


def runner_alive(cdir: str) -> bool:
    """The runner is at work: its pid (checked with its start time), or on a Slurm host its
    job still in the queue (the runner is the job's payload, maybe on another machine)."""
    rec = read_json(os.path.join(cdir, "runner.json")) or {}
    if rec.get("slurm_job_id"):
        return rec.get("state") in ("queued", "running") and slurm_job.active(
            str(rec["slurm_job_id"]))
    return rec.get("state") == "running" and procs.alive(rec.get("pid"), rec.get("proc_start"))


def summary(cdir: str) -> Dict[str, Any]:
    """The ``campaign`` event's fields: status.json, with a dead runner seen as interrupted."""
    spec = read_json(os.path.join(cdir, "spec.json")) or {}
    status = read_json(os.path.join(cdir, "status.json")) or {}
    runner = read_json(os.path.join(cdir, "runner.json")) or {}
    alive = runner_alive(cdir)
    state = status.get("state") or runner.get("state") or "starting"
    if runner.get("state") in ENDED:  # the runner's own last word wins over its summary
        state = runner["state"]
    if state == "queued":  # a Slurm host: the runner's job has not started it yet
        state = "running" if alive else "interrupted"
    if state == "running" and not alive:
        state = "interrupted"
    try:
        size = os.path.getsize(os.path.join(cdir, "journal.jsonl"))
    except OSError:
        size = 0
    out = {"id": os.path.basename(cdir), "name": spec.get("name"),
           "kind": spec.get("kind", "campaign"), "host": spec.get("host"), "state": state,
           "created_at": spec.get("created_at"), "ended_at": status.get("ended_at"),
           "reason": status.get("reason"), "attempt": status.get("attempt", 0),
           "current": status.get("current"), "server": status.get("server"),
           "plan": spec.get("plan"), "repeats": spec.get("repeats", 1),
           "variants": status.get("variants") or [
               {"name": v.get("name"), "label": v.get("label"), "state": "pending",
                "runs": [], "reason": None} for v in spec.get("variants") or []],
           "runner": {"pid": runner.get("pid"), "alive": alive,
                      **({"slurm_job_id": runner["slurm_job_id"], "node": runner.get("node")}
                         if runner.get("slurm_job_id") else {})},
           "journal_bytes": size}
    host = out["host"] or "HOST"
    if state == "interrupted" and runner.get("disk_full"):  # the runner said why it stopped
        out["disk_full"] = True
        out["reason"] = "%s; the campaign runner stopped there, everything before is in the " \
                        "journal (free space on the host, then dsv4tui campaign resume %s %s)" \
                        % (runner["disk_full"], host, out["id"])
    elif state == "interrupted":
        cur = status.get("current") or {}
        names = [v.get("name") for v in out["variants"]]
        vi = cur.get("variant")
        where = names[vi] if isinstance(vi, int) and vi < len(names) else None
        out["reason"] = "the campaign runner stopped without finishing%s (dsv4tui campaign " \
                        "resume %s %s)" % (" during variant %s" % where if where else "",
                                           host, out["id"])
    return out


def _fork_runner(cdir: str, resume: bool) -> Dict[str, Any]:
    """Fork the detached runner; its handshake (``ok`` + pid, or an error)."""
    from dsv4tui.agent.campaign import runner as campaign_runner

    log = os.open(os.path.join(cdir, "runner.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o644)
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the runner; coverage cannot see forked children
        code = 1
        try:
            os.close(r)
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            detach.close_fds_except((w,))
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            code = campaign_runner.main(cdir, resume, w)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(w)
    os.close(log)
    reply = detach.read_handshake(r, pid)
    if reply.get("error"):  # busy, disk_full, not_found
        err = reply["error"]
        raise protocol.AgentError(str(err.get("kind") or "runner"), str(err.get("message")),
                                  protocol.EXIT_BUSY if err.get("kind") == "busy"
                                  else protocol.EXIT_FAILED,
                                  **({"holder": err["holder"]} if err.get("holder") else {}))
    if not reply.get("ok"):
        log_path = os.path.join(cdir, "runner.log")
        raise protocol.AgentError("runner", "the campaign runner did not start: %s (see %s)"
                                  % (_last_line(log_path) or "no output", log_path))
    return reply


def _submit_runner(cdir: str, spec: Dict[str, Any], resume: bool) -> Dict[str, Any]:
    """A Slurm host: the runner as the payload of one job (:mod:`slurm_job`); the job id,
    recorded in runner.json (``queued`` until the runner starts and takes over the file)."""
    from dsv4tui.agent.campaign.runner import agent_argv

    job = slurm_job.submit(cdir, spec, agent_argv(), resume)
    write_json(os.path.join(cdir, "runner.json"), {"state": "queued", "slurm_job_id": job,
                                                   "submitted_at": time.time(),
                                                   "resume": resume})
    return {"ok": True, "pid": None, "slurm_job_id": job}


def _job_fields(reply: Dict[str, Any]) -> Dict[str, Any]:
    return {"slurm_job_id": reply["slurm_job_id"]} if reply.get("slurm_job_id") else {}


def run_job(args: Any) -> int:
    """``campaign run-job DIR``: the runner in the foreground, the payload of a campaign's
    Slurm job (its output is the job's, runner.log)."""
    from dsv4tui.agent.campaign import runner as campaign_runner

    cdir = os.path.abspath(args.dir)
    if not os.path.isfile(os.path.join(cdir, "spec.json")):
        raise _usage("no campaign in %s" % cdir)
    return campaign_runner.main(cdir, bool(args.resume))


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            lines = [ln.strip() for ln in fh.read()[-4096:].decode("utf-8", "replace")
                     .splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def start(args: Any) -> int:
    text = args.spec_json
    source = text[1:] if text.startswith("@") else None
    try:
        if source is not None:
            with open(os.path.expanduser(source), encoding="utf-8") as fh:
                text = fh.read()
            if args.remove_spec:
                os.unlink(os.path.expanduser(source))
        spec = check_spec(json.loads(text))
    except OSError as exc:
        raise _usage("cannot read %s: %s" % (source, exc.strerror)) from None
    except ValueError as exc:
        raise _usage("the campaign spec is not valid JSON: %s" % exc) from None
    holder = bench_lock.held_by_other()
    what = "a sweep" if spec.get("kind") == "sweep" else "another campaign"
    if holder is not None:
        raise bench_lock.busy_error(holder, what)
    _check_server_lock()
    for _ in range(5):
        cid = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
        cdir = os.path.join(campaigns_dir(), cid)
        try:
            os.mkdir(cdir, 0o700)
            break
        except FileExistsError:
            time.sleep(0.01)
        except OSError as exc:
            if not disk_full(exc):
                raise
            raise _full_error(exc, campaigns_dir()) from None
    else:
        raise protocol.AgentError("runner", "could not create a campaign directory")
    spec = dict(spec, id=cid, created_at=time.time())
    try:
        write_json(os.path.join(cdir, "spec.json"), spec)
        reply = _submit_runner(cdir, spec, resume=False) if spec.get("slurm") else \
            _fork_runner(cdir, resume=False)
    except OSError as exc:
        _discard(cdir)
        if not disk_full(exc):
            raise
        raise _full_error(exc, cdir) from None
    except protocol.AgentError as err:
        if err.kind in ("busy", "disk_full", "slurm"):  # it never ran: nothing to keep
            _discard(cdir)
        raise
    protocol.emit("campaign_started", id=cid, pid=reply.get("pid"), dir=cdir,
                  name=spec.get("name"), kind=spec.get("kind", "campaign"),
                  **_job_fields(reply))
    return 0


def _full_error(exc: OSError, where: str) -> protocol.AgentError:
    return protocol.AgentError("disk_full", "host disk full: %s in %s (%s free); nothing was "
                               "started" % (exc.strerror, where, size_text(free_bytes(where))))


def _check_server_lock() -> None:
    """A restart or stop in progress (another console's): a campaign starting now would
    measure, or restart, a server halfway through it."""
    owner = server_state.lock_busy()
    if owner is not None:
        raise protocol.AgentError(
            "busy", "busy: %s in progress by %s; start the campaign when it is done" % (
                owner.get("action", "a server command"), server_state.owner_text(owner)),
            protocol.EXIT_BUSY, owner=owner)


def _discard(cdir: str) -> None:
    """A campaign that never ran (its runner could not take the lock) leaves nothing behind."""
    for name in os.listdir(cdir):
        try:
            os.unlink(os.path.join(cdir, name))
        except OSError:
            pass
    try:
        os.rmdir(cdir)
    except OSError:
        pass


def follow(args: Any) -> int:
    cdir = _dir(args.id)
    path = os.path.join(cdir, "journal.jsonl")
    offset = max(0, int(args.offset or 0))
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    if offset > size:  # a journal shorter than what the console holds: read it again
        protocol.emit("notice", kind="journal_reset", message="the journal is shorter (%d "
                      "bytes) than the offset asked for (%d): reading it from the start"
                      % (size, offset))
        offset = 0
    protocol.emit("journal_pos", id=args.id, offset=offset)
    while True:
        alive = runner_alive(cdir)
        ended = (read_json(os.path.join(cdir, "runner.json")) or {}).get("state") in ENDED
        lines, new, torn = read_lines(path, offset, final=not alive,
                                      max_events=FOLLOW_CHUNK_EVENTS)
        if lines:
            protocol.write_lines(raw.decode("ascii") for raw, _ in lines)
        for t in torn:
            protocol.emit("journal_torn", id=args.id, **t)
        if new != offset:
            offset = new
            protocol.emit("journal_pos", id=args.id, offset=offset)
            continue
        if ended or not alive:
            info = summary(cdir)
            protocol.emit("journal_end", id=args.id, offset=offset, state=info["state"],
                          reason=info.get("reason"))
            return 0
        if args.no_wait:
            protocol.emit("journal_end", id=args.id, offset=offset, state="running",
                          reason=None)
            return 0
        time.sleep(0.1)


def status(args: Any) -> int:
    protocol.emit("campaign", **summary(_dir(args.id)))
    return 0


def list_(args: Any) -> int:
    root = campaigns_dir()
    for name in sorted(os.listdir(root)):
        cdir = os.path.join(root, name)
        if not (_ID.match(name) and os.path.isdir(cdir)):
            continue
        info = summary(cdir)
        if args.running and info["state"] != "running":
            continue
        protocol.emit("campaign", **info)
    return 0


def cancel(args: Any) -> int:
    cdir = _dir(args.id)
    rec = read_json(os.path.join(cdir, "runner.json")) or {}
    if not runner_alive(cdir):
        info = summary(cdir)
        protocol.emit("campaign_cancelled", id=args.id, state=info["state"], was_running=False,
                      server=info.get("server"), message="the campaign is not running (%s)"
                      % info["state"])
        return 0
    if rec.get("slurm_job_id"):  # the runner is its job's payload: Slurm signals it
        slurm_job.cancel(str(rec["slurm_job_id"]), queued=rec.get("state") == "queued")
    else:
        try:
            os.kill(int(rec["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass  # it ended just now: the summary below says how
    pid = rec.get("pid") or "of Slurm job %s" % rec.get("slurm_job_id")
    deadline = time.monotonic() + float(args.wait)
    while time.monotonic() < deadline and runner_alive(cdir):
        time.sleep(0.1)
    if rec.get("state") == "queued" and not runner_alive(cdir):  # it never ran
        rec = read_json(os.path.join(cdir, "runner.json")) or rec
        if rec.get("state") == "queued":
            write_json(os.path.join(cdir, "runner.json"), dict(rec, state="cancelled",
                                                                 ended_at=time.time()))
    info = summary(cdir)
    if runner_alive(cdir):
        raise protocol.AgentError("cancel", "the campaign runner (pid %s) has not ended %g s "
                                  "after SIGTERM; it is still finishing its current step"
                                  % (pid, float(args.wait)))
    protocol.emit("campaign_cancelled", id=args.id, state=info["state"], was_running=True,
                  server=info.get("server"))
    return 0


def resume(args: Any) -> int:
    cdir = _dir(args.id)
    info = summary(cdir)
    if info["state"] == "running":
        raise protocol.AgentError("running", "campaign %s is still running (runner pid %s)"
                                  % (args.id, info["runner"]["pid"]))
    if info["state"] != "interrupted":
        raise protocol.AgentError("ended", "campaign %s already ended: %s; nothing to resume"
                                  % (args.id, info["state"]))
    holder = bench_lock.held_by_other()
    if holder is not None:
        raise bench_lock.busy_error(holder, "resuming another campaign")
    _check_server_lock()
    spec = read_json(os.path.join(cdir, "spec.json")) or {}
    try:
        reply = _submit_runner(cdir, spec, resume=True) if spec.get("slurm") else \
            _fork_runner(cdir, resume=True)
    except protocol.AgentError as err:
        if err.kind != "disk_full":
            raise
        raise protocol.AgentError(err.kind, "campaign %s not resumed: %s" % (
            args.id, err.message)) from None
    protocol.emit("campaign_started", id=args.id, pid=reply.get("pid"), dir=cdir,
                  name=info.get("name"), kind=info.get("kind"), resumed=True,
                  **_job_fields(reply))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("campaign", help="campaigns run on this host by a detached runner")
    cmds = p.add_subparsers(dest="campaign_command", required=True)
    s = cmds.add_parser("start", help="start a campaign runner (detached)")
    s.add_argument("--spec-json", required=True, help="the campaign spec, JSON or @FILE")
    s.add_argument("--remove-spec", action="store_true",
                   help="delete the @FILE once read (the console uploaded it)")
    s.set_defaults(func=start)
    f = cmds.add_parser("follow", help="stream the journal from a byte offset")
    f.add_argument("id")
    f.add_argument("--offset", type=int, default=0)
    f.add_argument("--no-wait", action="store_true", help="stop at the journal's current end")
    f.set_defaults(func=follow)
    t = cmds.add_parser("status", help="one campaign's state")
    t.add_argument("id")
    t.set_defaults(func=status)
    ls = cmds.add_parser("list", help="every campaign on this host")
    ls.add_argument("--running", action="store_true", help="only those running now")
    ls.set_defaults(func=list_)
    c = cmds.add_parser("cancel", help="SIGTERM the runner; finished requests are kept")
    c.add_argument("id")
    c.add_argument("--wait", type=float, default=60.0, help="seconds to wait for it to end")
    c.set_defaults(func=cancel)
    r = cmds.add_parser("resume", help="run what an interrupted campaign did not finish")
    r.add_argument("id")
    r.set_defaults(func=resume)
    j = cmds.add_parser("run-job", help="run a campaign's runner in the foreground (the "
                        "payload of its Slurm job)")
    j.add_argument("dir")
    j.add_argument("--resume", action="store_true")
    j.set_defaults(func=run_job)

