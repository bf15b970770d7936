"""``server start|stop|status``: launch, stop and watch the SGLang server this agent owns.

- start: refuses when our server is alive (unless ``--replace``) or the port is taken (naming
  the PID/command); launches the argv list in a new session (its own process group), stdout +
  stderr to the log, with a launch id of its own in its environment (``DSV4TUI_LAUNCH_ID``,
  inherited by every descendant), and records it in the state file of the agent's cache dir.
  A small watcher process (forked, in its own session) waits for the server and records its
  exit code.
- stop: record the server's process tree (its group and session, its descendants by
  parentage, also those that left with setsid(), and every process of our user that carries
  the launch id: a double-forked daemon too), SIGTERM to the main PID, wait for the drain
  (``--grace``), SIGKILL the group; then SIGTERM, a short grace and SIGKILL for whatever of the
  tree is left, then wait (bounded) until the GPUs no longer hold its PIDs; reports the freed
  memory, and the PIDs that could not be ended (``leftover_pids``, exit 1). Only processes of
  the tree we started are touched, each checked by its start time (PID reuse). When the
  server itself is gone (a crash) or its PID is another process's now, only processes that
  carry the launch id are ours: the rest of its old group/session is left alone and named
  (``left_alone``, ``note``). An adopted server (no launch id) is stopped by its PID and, while
  it runs, its group and descendants.
- status: stopped / starting (phase) / ready / crashed (exit code, last errors) / foreign.
start and stop hold an flock so two consoles cannot act at once (the second gets "busy").

Events: ``started``, ``stopping``, ``stopped``, ``status``, ``log_event`` (with --wait-ready).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Set

from dsv4tui.agent import detach, protocol
from dsv4tui.agent.host import adopt, bench_lock, failure, health, logparse, procs, server_state
from dsv4tui.agent.host.launch_spec import (
    DEFAULT_GPU_WAIT_S,
    DEFAULT_GRACE_S,
    LaunchSpec,
    json_arg,
)
from dsv4tui.agent.host.logs import ParsedTail, redactor, server_secrets
from dsv4tui.agent.host.procs import alive, proc_start, proc_table
from dsv4tui.agent.host.server_state import (
    EXIT_FILE,
    STATE_FILE,
    ServerLock,
    exit_record,
    forget_exit,
    ours_alive,
    read_state,
    write_json,
)
from dsv4tui.agent.state import cache_dir

_REDACTED = "***"
_WAIT_EVENTS = ("phase", "load_weights_progress", "http_up", "ready", "sigterm",
                *logparse.ERROR_KINDS)


# -- processes (agent/host/procs.py reads them) -------------------------------------------------

class ServerTree:
    """The processes our server started: its process group and session, every descendant by
    parentage -- also those that left the group with setsid(), which only their ppid link
    tells apart -- and every process that carries our launch's identity (``launch_id``, in
    its environment: found whatever it did to its parentage, a double-forked daemon too).
    Each is remembered with its start time as soon as it is seen, because a process whose
    parent dies is reparented (to init or a subreaper) and the link is gone: scan before the
    first signal. A remembered PID counts only while the process with that PID has the same
    start time (PID reuse), and nothing that is not ours is ever added: a process is ours if
    it is the server (its recorded start time), carries our launch id, is in the server's
    group/session while the server itself runs (its group id cannot be anyone else's then),
    or is a child of one of ours (started after that parent). When the server is gone or its
    PID is someone else's, group/session members without our launch id are left alone
    (``spared``): the group id may be a new process's. The agent itself and its ancestors are
    never ours."""

    def __init__(self, pid: int, start: Optional[int], pgid: int,
                 launch_id: Optional[str] = None) -> None:
        self.pid, self.pgid = pid, pgid
        self.start = int(start) if start is not None else None
        self.launch_id = launch_id or None
        self.known: Dict[int, int] = {}  # pid -> start time
        self.checked: Dict[int, int] = {}  # environment read, not our launch's: pid -> start
        self.spared: Dict[int, int] = {}  # in the recorded group/session, not shown to be ours
        self.reused: Optional[int] = None  # the recorded PID runs another process: its start
        self.never: Set[int] = set()  # the agent and its ancestors

    def _carries(self, pid: int, began: int) -> bool:
        """Does ``pid`` carry our launch id? Each process's environment is read once."""
        if not self.launch_id or self.checked.get(pid) == began:
            return False
        if procs.launch_id(pid) == self.launch_id:
            return True
        self.checked[pid] = began
        return False

    def scan(self) -> List[int]:
        """Remember what is new; the PIDs of the tree still alive (zombies are not)."""
        table = proc_table()
        if not self.never:
            p = os.getpid()
            while p > 0 and p not in self.never:
                self.never.add(p)
                p = table[p][0] if p in table else 0
        for seen in (self.known, self.checked, self.spared):
            for p, began in list(seen.items()):
                if p not in table or table[p][3] != began:
                    del seen[p]  # gone (or the PID now belongs to someone else)
        me = table.get(self.pid)
        self.reused = None
        if me is not None and self.pid not in self.known and self.pid not in self.never:
            # the server is its PID with the recorded start time (none recorded: our launch id)
            ours = me[3] == self.start if self.start is not None else \
                self._carries(self.pid, me[3])
            if ours:
                self.known[self.pid] = me[3]
            else:
                self.reused = me[3]
        leader = self.pid in self.known  # running, or a zombie not yet reaped: the PID is held
        floor = self.known.get(self.pid, self.start)
        # parents start before their children: one pass in start order finds whole subtrees
        for p, (ppid, pgrp, sid, began, st) in sorted(table.items(), key=lambda kv: kv[1][3]):
            if p in self.known or p in self.never:
                continue
            in_group = self.pgid in (pgrp, sid) and floor is not None and began >= floor
            if (in_group and leader) or (ppid in self.known and began >= self.known[ppid]) \
                    or self._carries(p, began):
                self.known[p] = began
                self.spared.pop(p, None)
            elif in_group and st not in ("Z", "X") and p != self.pid:
                self.spared[p] = began
        return sorted(p for p in self.known if table[p][4] not in ("Z", "X"))

    def leader_alive(self) -> bool:
        """Is the server itself (as the last scan verified it) still running?"""
        began = self.known.get(self.pid)
        return began is not None and alive(self.pid, began)

    def left_alone(self) -> List[int]:
        """The PIDs the record names (its PID, its group/session) not shown to be ours."""
        return sorted(set(self.spared) | ({self.pid} if self.reused is not None else set()))

    def note(self) -> Optional[str]:
        """Why ``left_alone`` was not signalled, in a sentence (None: nothing was)."""
        spared = sorted(self.spared)
        if self.reused is not None:
            text = ("pid %d is another process now (it started after the server dsv4tui "
                    "recorded: PID reuse)" % self.pid)
            return text + (": it and pids %s of its process group were left alone" % spared
                           if spared else ": left alone")
        if spared:
            return ("left alone: pids %s in process group %d, which cannot be shown to be the "
                    "server's (it is gone, and they do not carry its launch id)"
                    % (spared, self.pgid))
        return None

    def signal(self, pids: List[int], sig: int) -> None:
        for p in pids:
            if p in self.known:
                _signal_if_same(p, self.known[p], sig)


def _signal_if_same(pid: int, start: int, sig: int) -> None:
    """Signal ``pid`` only if it is still the process that started at ``start``: through a
    pidfd where the kernel has them (no window for PID reuse), else checked just before."""
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if pidfd_open is not None and send is not None:
        try:
            fd = pidfd_open(pid)
        except OSError:
            fd = None  # gone, or no pidfd support in this kernel
            if not alive(pid, start):
                return
        if fd is not None:
            try:
                if proc_start(pid) == start:  # the pidfd pins the process we just checked
                    send(fd, sig)
            except OSError:
                pass
            finally:
                os.close(fd)
            return
    if proc_start(pid) == start:
        _kill(pid, sig)


# -- start -----------------------------------------------------------------------------------

def _check_argv(argv: List[Any]) -> List[str]:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise protocol.AgentError("usage", "--argv-json must be a non-empty list of strings",
                                  protocol.EXIT_USAGE)
    if any("\x00" in a for a in argv):
        raise protocol.AgentError("usage", "an argument contains a NUL byte", protocol.EXIT_USAGE)
    exe = os.path.expanduser(argv[0])
    found = exe if os.sep in exe else shutil.which(exe)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise protocol.AgentError("not_found", "cannot launch: %s is not an executable on this "
                                  "host (the profile's python)" % argv[0])
    return [exe, *argv[1:]]


def _resolve(path: Optional[str], default: str) -> str:
    p = os.path.expanduser(path) if path else default
    return p if os.path.isabs(p) else str(cache_dir() / p)


def redact(argv: List[str]) -> List[str]:
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--api-key" and i + 1 < len(out):
            out[i + 1] = _REDACTED
        elif arg.startswith("--api-key="):
            out[i] = "--api-key=" + _REDACTED
    return out


def _libc() -> Any:
    """libc for prctl, loaded before fork (no imports or dlopen in a forked child)."""
    try:
        import ctypes

        return ctypes.CDLL(None)
    except Exception:
        return None


def _name_process(libc: Any, name: bytes) -> None:
    """Best effort: what ps/top show as the command name (the cmdline stays the agent's)."""
    try:
        libc.prctl(15, name, 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


def _spawn(argv: List[str], env: Dict[str, str], log: str, workdir: str) -> int:
    """Start the server in its own session through a forked watcher; return the server PID.

    The watcher (own session, stdio on /dev/null, no inherited fds) waits for the server and
    writes its exit status to the exit file, so ``status`` can say how it ended.
    """
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    exit_path = server_state.path(EXIT_FILE)
    libc = _libc()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the watcher; coverage cannot see forked children
        code = 0
        try:
            os.close(r)
            os.setsid()
            # fork again: the watcher is then nobody's child here (a long-lived campaign runner
            # that starts one server per variant is never left with exited watchers, zombies)
            if os.fork() != 0:
                os._exit(0)
            _name_process(libc, b"dsv4tui-watch")
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, lambda *_: None)  # handlers reset to default at exec
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            detach.close_fds_except((w, log_fd))
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_fd,
                                        stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                        start_new_session=True, close_fds=True)
            except OSError as exc:
                os.write(w, json.dumps({"error": str(exc)}).encode())
                raise
            os.write(w, json.dumps({"pid": proc.pid}).encode())
            os.close(w)
            os.close(log_fd)
            rc = proc.wait()
            record = {"pid": proc.pid, "time": time.time(),
                      "exit_code": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None}
            tmp = exit_path + ".%d.tmp" % os.getpid()
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(tmp, exit_path)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    os.close(log_fd)
    try:
        os.waitpid(pid, 0)  # the first child exits at once (its child is the watcher)
    except OSError:
        pass
    reply = detach.read_handshake(r, pid)
    if "pid" not in reply:
        raise protocol.AgentError("launch", "cannot launch %s: %s" % (
            argv[0], reply.get("error", "the watcher process failed")))
    return int(reply["pid"])


def start(args: Any) -> int:
    """``agent server start``: the argv surface of :func:`start_launch`."""
    return start_launch(LaunchSpec.from_args(args))


def start_launch(spec: LaunchSpec) -> int:
    """Launch ``spec``'s server in its own process group (stopping ours first with
    ``replace``), following its startup until ready with ``wait_ready``."""
    argv = _check_argv(spec.argv)
    env_extra = dict(spec.env)
    profile = spec.profile
    log = _resolve(spec.log, "server.log")
    workdir = _resolve(spec.workdir, str(cache_dir()))
    if not os.path.isdir(workdir):
        raise protocol.AgentError("not_found", "workdir not found on this host: %s" % workdir)
    env = dict(os.environ)
    env.update(env_extra)
    launch_argv = list(argv)
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise protocol.AgentError("api_key", "the API key variable %s is not set on this "
                                      "host" % spec.api_key_env)
        launch_argv += ["--api-key", key]
    bench_lock.check_free("a restart")  # before the server lock: a refusal holds nothing
    with ServerLock("restart" if spec.replace else "start"):
        bench_lock.check_free("a restart")
        state = read_state()
        if ours_alive(state):
            assert state is not None
            if not spec.replace:
                raise protocol.AgentError(
                    "already_running", "a server started by dsv4tui is already running: pid %s "
                    "on port %s (stop it first, or restart)" % (state["pid"], state.get("port")))
            with detach.signals_deferred():  # a stop half done leaves a half-dead server group
                _stop_and_report(state, spec.grace, spec.gpu_wait)
        node_rank = spec.node_rank
        # a node rank > 0 serves no HTTP: the port is node rank 0's (maybe on this machine)
        owner = health.port_owner(spec.port, health.probe_host(spec.host)) \
            if node_rank == 0 else None
        if owner is not None:
            raise protocol.AgentError(
                "port_taken", "port %d is taken by %s; dsv4tui did not start it and will not "
                "stop it" % (spec.port, health.owner_text(owner)), owner=owner)
        try:
            os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
            if os.path.exists(log):
                os.replace(log, log + ".1")
        except OSError as exc:
            raise protocol.AgentError("log", "cannot prepare the log file %s: %s" % (
                log, exc.strerror or exc)) from None
        forget_exit()
        started_at = time.time()
        launch_id = secrets.token_hex(16)  # every process of this launch inherits it
        env[procs.LAUNCH_ID_VAR] = launch_id
        pid = _spawn(launch_argv, env, log, workdir)
        state = {"v": 1, "pid": pid, "pgid": pid, "proc_start": proc_start(pid),
                 "launch_id": launch_id,
                 "argv": redact(launch_argv), "port": spec.port, "host": spec.host, "log": log,
                 "workdir": workdir, "started_at": started_at, "profile": profile,
                 "api_key_env": spec.api_key_env, "env": env_extra, "stopped_at": None,
                 "node_rank": node_rank}
        write_json(STATE_FILE, state)
        protocol.emit("started", pid=pid, pgid=pid, port=spec.port, host=spec.host, log=log,
                      workdir=workdir, argv=state["argv"], started_at=started_at)
        if spec.wait_ready:
            return wait_ready(state, spec.timeout, live=True)
        time.sleep(0.3)  # an argv the server refuses (exit 2) fails right away: say so now
        if not alive(pid, state["proc_start"]):
            _report_crash(state)
    return 0


# -- GPU memory held by the group (NVML, or the simulator's state file) -----------------------

def _sim_usage(members: List[int], path: Optional[str]) -> Optional[Dict[str, Any]]:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {}
    mib = 0.0
    if isinstance(data, dict) and data.get("pid") in members and alive(data.get("pid")):
        mib = float(data.get("mem_used_frac") or 0) * float(data.get("mem_total_mib") or 0) * \
            int(data.get("tp_size") or 1)
    return {"source": "simulated", "mib": round(mib, 1), "sim_pid": data.get("pid")
            if isinstance(data, dict) else None}


def _nvml() -> Dict[str, Any]:
    """``{"procs": {pid: MiB}, "device_used_mib": total}`` or ``{"error": why}``."""
    try:
        import pynvml
    except ImportError as exc:
        return {"error": "pynvml not importable: %s" % exc}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # library missing, driver not loaded ...
        return {"error": str(exc) or type(exc).__name__}
    try:
        procs: Dict[int, float] = {}
        used = 0.0
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            used += pynvml.nvmlDeviceGetMemoryInfo(handle).used / 1048576.0
            for getter in ("nvmlDeviceGetComputeRunningProcesses",
                           "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    plist = getattr(pynvml, getter)(handle)
                except Exception:
                    continue
                for proc in plist:
                    mem = getattr(proc, "usedGpuMemory", None) or 0
                    procs[int(proc.pid)] = procs.get(int(proc.pid), 0.0) + mem / 1048576.0
        return {"procs": procs, "device_used_mib": used}
    except Exception as exc:
        return {"error": str(exc) or type(exc).__name__}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def sim_state_path(state: Optional[Dict[str, Any]]) -> Optional[str]:
    """The simulator's state file the server was given (its env), else the agent's."""
    env = (state or {}).get("env") or {}
    return env.get("DSV4TUI_SIM_STATE") or os.environ.get("DSV4TUI_SIM_STATE")


def gpu_usage(members: List[int], sim_path: Optional[str]) -> Dict[str, Any]:
    """GPU memory held by ``members`` before a stop."""
    sim = _sim_usage(members, sim_path)
    if sim is not None:
        return sim
    snap = _nvml()
    if "error" in snap:
        return {"source": None, "mib": None, "reason": "NVML not available: %s" % snap["error"]}
    mine = {p: m for p, m in snap["procs"].items() if p in members}
    if mine:
        return {"source": "nvml", "mib": round(sum(mine.values()), 1), "pids": sorted(mine)}
    return {"source": "nvml-device", "mib": None, "device_used_mib": snap["device_used_mib"]}


def wait_freed(before: Dict[str, Any], members: List[int], timeout: float,
               sim_path: Optional[str]) -> Dict[str, Any]:
    """Wait (bounded) until the GPUs no longer hold the group; the ``gpu_mem_*`` fields."""
    t0 = time.monotonic()
    out: Dict[str, Any] = {"gpu_mem_source": before.get("source"), "gpu_mem_freed_mib": None,
                           "gpu_mem_reason": before.get("reason")}
    src = before.get("source")
    while src is not None:
        if src == "simulated":
            now = _sim_usage(members, sim_path) or {"mib": 0.0}
            if not now["mib"] or time.monotonic() - t0 >= timeout:
                out["gpu_mem_freed_mib"] = round(before["mib"] - now["mib"], 1)
                if now["mib"]:
                    out["gpu_mem_reason"] = "simulated memory still held after %gs" % timeout
                break
        elif src == "nvml":
            snap = _nvml()
            held = {p: m for p, m in snap.get("procs", {}).items() if p in members}
            if not held or time.monotonic() - t0 >= timeout:
                out["gpu_mem_freed_mib"] = round(before["mib"] - sum(held.values()), 1)
                if held:
                    out["gpu_mem_reason"] = "PIDs %s still hold GPU memory after %gs" % (
                        sorted(held), timeout)
                break
        else:  # our PIDs are not visible to NVML (PID namespace): watch the device totals
            last, stable_since = before.get("device_used_mib"), time.monotonic()
            while time.monotonic() - t0 < min(timeout, 10.0):
                time.sleep(0.25)
                used = _nvml().get("device_used_mib")
                if used is None:
                    break
                if last is not None and used < last - 1:
                    last, stable_since = used, time.monotonic()
                elif time.monotonic() - stable_since >= 1.0:
                    break
            if last is not None and before.get("device_used_mib") is not None:
                out["gpu_mem_freed_mib"] = round(max(before["device_used_mib"] - last, 0.0), 1)
                out["gpu_mem_reason"] = ("estimated from device totals: NVML does not list "
                                         "the server's PIDs (container PID namespace?)")
            break
        time.sleep(0.2)
    out["gpu_wait_s"] = round(time.monotonic() - t0, 3)
    return out


# -- stop ------------------------------------------------------------------------------------

def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


STRAGGLER_GRACE_S = 3.0  # SIGTERM -> SIGKILL for what outlives the main process
KILL_WAIT_S = 10.0


def stop_server(state: Dict[str, Any], grace: float, gpu_wait: float) -> Dict[str, Any]:
    """Stop our server and every process it started; returns the fields of the ``stopped``
    event (``leftover_pids``: what could not be ended; ``left_alone``/``note``: what the record
    names that is not ours, and was not signalled). ``how``: sigterm (drained), sigkill (it
    did not exit within the grace), orphans (it had exited: what it left was ended),
    not_running."""
    pid, pgid, start = int(state["pid"]), int(state.get("pgid") or state["pid"]), \
        state.get("proc_start")
    t0 = time.monotonic()
    tree = ServerTree(pid, start, pgid, state.get("launch_id"))
    members = tree.scan()  # before any signal: orphans lose their link to us
    left_alone, note = tree.left_alone(), tree.note()
    if not members:
        return {"how": "not_running", "pid": pid, "drain_s": None, "stop_s": 0.0,
                "exit_code": exit_record(pid).get("exit_code"), "gpu_mem_freed_mib": None,
                "gpu_mem_reason": "the server was not running", "leftover_pids": [],
                "ended_pids": [], "left_alone": left_alone, "note": note}
    sim_path = sim_state_path(state)
    before = gpu_usage(members, sim_path)
    protocol.emit("stopping", pid=pid, pgid=pgid, grace_s=grace, group=members)
    how, drain_s = "orphans", None
    if tree.leader_alive():
        how = "sigkill"
        tree.signal([pid], signal.SIGTERM)
        deadline = t0 + grace
        while time.monotonic() < deadline and tree.leader_alive():
            tree.scan()  # children forked while draining, and setsid() ones, are ours too
            time.sleep(0.05)
        if not tree.leader_alive():
            how, drain_s = "sigterm", round(time.monotonic() - t0, 3)
        else:
            try:  # the leader is alive (its start time checked), so its group id is ours
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
            tree.signal(tree.scan(), signal.SIGKILL)
    # What outlives the main process (children that left the group, or ignore its death):
    # SIGTERM, a short grace, then SIGKILL until gone or KILL_WAIT_S has passed.
    left = tree.scan()
    seen = set(members) | set(tree.known)
    if left:
        tree.signal(left, signal.SIGTERM)
        soft = time.monotonic() + min(STRAGGLER_GRACE_S, max(grace, 0.5))
        while left and time.monotonic() < soft:
            time.sleep(0.05)
            left = tree.scan()
            seen |= set(tree.known)
    hard = time.monotonic() + KILL_WAIT_S
    while left and time.monotonic() < hard:
        tree.signal(left, signal.SIGKILL)
        time.sleep(0.05)
        left = tree.scan()
        seen |= set(tree.known)
    left_alone, note = sorted(set(left_alone) | set(tree.left_alone())), tree.note() or note
    freed = wait_freed(before, sorted(seen), gpu_wait, sim_path)
    record = exit_record(pid, wait_s=1.0)
    result = {"how": how, "pid": pid, "drain_s": drain_s,
              "stop_s": round(time.monotonic() - t0, 3), "exit_code": record.get("exit_code"),
              "signal": record.get("signal"), "leftover_pids": left,
              "ended_pids": sorted(seen - set(left)), "left_alone": left_alone, "note": note,
              **freed}
    state = dict(state)
    state.update(stopped_at=time.time(), stop=result)
    write_json(STATE_FILE, state)
    return result


def _stop_and_report(state: Dict[str, Any], grace: float, gpu_wait: float) -> Dict[str, Any]:
    result = stop_server(state, grace, gpu_wait)
    protocol.emit("stopped", **result)
    return result


def stop(args: Any) -> int:
    bench_lock.check_free("stopping the server")
    with ServerLock("stop"):
        bench_lock.check_free("stopping the server")
        state = read_state()
        if not state or state.get("stopped_at"):
            protocol.emit("stopped", how="not_running", pid=state.get("pid") if state else None,
                          drain_s=None, stop_s=0.0, exit_code=None, gpu_mem_freed_mib=None,
                          gpu_mem_reason="no server started by dsv4tui is running",
                          leftover_pids=[])
            return 0
        result = _stop_and_report(state, args.grace, args.gpu_wait)
    return protocol.EXIT_FAILED if result["leftover_pids"] else 0


# -- status ----------------------------------------------------------------------------------

def parse_log(path: Optional[str], secrets: List[str]) -> Dict[str, Any]:
    """Parse the log (its first 4 MB and, when bigger, its last 1 MB): phase, errors, tail."""
    redact = redactor(secrets)
    parser = logparse.LogParser()
    events: List[Dict[str, Any]] = []
    tail: List[str] = []
    chunks: List[bytes] = []
    try:
        with open(path or "", "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            chunks.append(fh.read(4 << 20))
            if size > 4 << 20:
                fh.seek(max(size - (1 << 20), 4 << 20))
                rest = fh.read()
                chunks.append(rest[rest.find(b"\n") + 1:])
    except OSError:
        pass
    for chunk in chunks:
        lines = [redact(x) for x in chunk.decode("utf-8", "replace").split("\n")]
        if lines and lines[-1] == "":
            lines.pop()
        for line in lines:
            events.extend(parser.feed(line))
        tail = (tail + lines)[-20:]
    events.extend(parser.close())
    return {"parser": parser, "events": events, "tail": [t.split("\r")[-1] for t in tail]}


def status_fields(state: Optional[Dict[str, Any]], port: Optional[int] = None,
                  host: Optional[str] = None, http: bool = True) -> Dict[str, Any]:
    """The ``status`` event's fields. ``http=False``: from the processes and the log alone, no
    request to the server (a watcher polling every second must not fill its access log)."""
    asked = port
    if state and not state.get("stopped_at") and alive(state.get("pid"), state.get("proc_start")):
        asked = None  # our live server is the answer, whichever port was asked about
    port = int(asked or (state or {}).get("port") or 30000)
    host = (host if asked else None) or (state or {}).get("host") or "127.0.0.1"
    probe = health.probe_host(host)
    base: Dict[str, Any] = {"port": port, "host": host, "ours": False}
    if state and not state.get("stopped_at") and int(state.get("port") or 0) == port:
        pid, start = int(state["pid"]), state.get("proc_start")
        info = parse_log(state.get("log"), server_secrets(state))
        parser: logparse.LogParser = info["parser"]
        base.update(ours=True, pid=pid, pgid=state.get("pgid"), log=state.get("log"),
                    argv=state.get("argv"), profile=state.get("profile"),
                    started_at=state.get("started_at"),
                    phases=logparse.phase_list(info["events"]))  # startup, from its log
        if alive(pid, start) and int(state.get("node_rank") or 0) > 0:
            joined = _worker_joined(parser)
            base.update(state="ready" if joined else "starting",
                        phase="ready" if joined else parser.current_phase,
                        phase_label="joined node rank 0" if joined else
                        logparse.PHASE_LABELS.get(parser.current_phase, parser.current_phase),
                        load_percent=parser.load_percent, health=None,
                        node_rank=int(state["node_rank"]),
                        uptime_s=round(time.time() - float(state["started_at"]), 1),
                        startup_s=parser.startup_s)
            if parser.current_phase == "draining":
                base.update(state="stopping", phase="draining")
            return base
        if alive(pid, start):
            hl = health.health(port, probe) if http else {"status": None}
            ready = hl["status"] == 200 or (parser.ready and parser.current_phase == "ready")
            phase = parser.current_phase if not ready or parser.current_phase == "draining" \
                else "ready"
            base.update(state="ready" if ready and phase != "draining" else "starting",
                        phase=phase, phase_label=logparse.PHASE_LABELS.get(phase, phase),
                        load_percent=parser.load_percent, health=hl["status"],
                        uptime_s=round(time.time() - float(state["started_at"]), 1),
                        startup_s=server_state.startup_s(state) or (
                            server_state.startup_s(state, parser.ready_ts)
                            if parser.ready_ts is not None else None))
            if phase == "draining":
                base["state"] = "stopping"
            elif base["state"] == "ready" and http:
                key_env = state.get("api_key_env")
                base["server_info"] = health.summarize_server_info(health.server_info(
                    port, probe, os.environ.get(key_env) if key_env else None, timeout=2.0))
            return base
        rec = exit_record(pid, wait_s=0.5)
        base.update(state="crashed", phase=parser.current_phase, exit_code=rec.get("exit_code"),
                    signal=rec.get("signal"), ended_at=rec.get("time"),
                    failed_in=parser.failed_in, cause=logparse.root_cause(info["events"]),
                    failure=failure.diagnose(info["events"], parser, rec.get("exit_code"),
                                             rec.get("signal")),
                    last_errors=logparse.error_lines(info["events"]), tail=info["tail"])
        return base
    owner = health.port_owner(port, probe)
    if owner is not None and not http:
        base.update(state="foreign", foreign=owner)
        return base
    if owner is not None:
        hl = health.health(port, probe)
        key_env = (state or {}).get("api_key_env")
        key = os.environ.get(key_env) if key_env else None
        log = adopt.foreign_log(owner)  # its stdout/stderr, when a file: the log to follow
        if log:
            base.update(log=log, log_source="stdout of pid %s" % owner.get("pid"))
        base.update(state="foreign", foreign=owner, health=hl["status"],
                    server_info=health.summarize_server_info(
                        health.server_info(port, probe, key) if hl["status"] is not None
                        else None),
                    model_info=health.model_info(port, probe, key)
                    if hl["status"] is not None else None)
        return base
    base.update(state="stopped")
    if state and state.get("stop"):
        base["last_stop"] = state["stop"]
    return base


def _worker_joined(parser: logparse.LogParser) -> bool:
    """A node rank > 0 (no HTTP server of its own) is up once its CUDA graphs are captured:
    it has joined node rank 0's process group and serves its requests."""
    return parser.current_phase in ("http_up", "warmup", "ready")


def _report_crash(state: Dict[str, Any]) -> None:
    fields = status_fields(state)
    protocol.emit("status", **fields)
    errors = fields.get("last_errors") or []
    code = fields.get("exit_code")
    how = "exit code %s" % code if code is not None else (
        "signal %s" % fields["signal"] if fields.get("signal") else "an unknown status")
    last = fields.get("cause") or next((t for t in reversed(fields.get("tail") or [])
                                        if t.strip()), "no output")
    raise protocol.AgentError("crashed", "the server exited with %s during startup: %s" % (
        how, last), protocol.EXIT_FAILED, last_errors=errors, tail=fields.get("tail"),
        failure=fields.get("failure"))


def _emit_wait_events(events: List[Dict[str, Any]], started: float, clock: Dict[str, Any]
                      ) -> None:
    """Emit the startup events; with ``clock["live"]`` (we have followed the log since the
    launch), phases SGLang does not time itself get durations from the host clock instead of
    the log's one-second timestamps."""
    for ev in events:
        if ev["kind"] not in _WAIT_EVENTS:
            continue
        elapsed = round(time.time() - started, 3)
        if ev["kind"] == "phase":
            if ev["name"] == "ready":
                clock["ready"] = True
            if clock["live"] and ev["name"] in ("kv_cache", "http_up", "ready"):
                ev["duration_s"] = round(max(elapsed - clock["mark"], 0.0), 3)
                ev["clock"] = "agent"
            clock["mark"] = elapsed
        protocol.emit("log_event", event=ev, elapsed_s=elapsed)


def wait_ready(state: Dict[str, Any], timeout: float, live: bool = False) -> int:
    """Follow the log from launch, emitting phase/error events, until ready or dead."""
    pid, start = int(state["pid"]), state.get("proc_start")
    started = float(state["started_at"])
    deadline = time.monotonic() + timeout
    tail = ParsedTail(str(state["log"]), server_secrets(state))
    probe = health.probe_host(state.get("host"))
    next_probe = 0.0
    clock: Dict[str, Any] = {"live": live, "mark": 0.0}
    while True:
        _, events = tail.poll()
        _emit_wait_events(events, started, clock)
        ready = tail.parser.ready
        worker = int(state.get("node_rank") or 0) > 0
        if worker:
            ready = _worker_joined(tail.parser)
        elif not ready and time.monotonic() >= next_probe:
            next_probe = time.monotonic() + 0.5
            ready = tail.parser.current_phase in ("warmup", "ready") and \
                health.health(int(state["port"]), probe, 1.0)["status"] == 200
        if ready:
            _, events = tail.poll()  # the log's own ready line, if it is there already
            _emit_wait_events(events, started, clock)
            if not clock.get("ready"):  # /health (or a node's join) said ready first
                elapsed = round(time.time() - started, 3)
                protocol.emit("log_event", elapsed_s=elapsed, event={
                    "kind": "phase", "name": "ready", "clock": "agent",
                    "source": "joined" if worker else "health",
                    "duration_s": round(max(elapsed - clock["mark"], 0.0), 3)})
            fields = status_fields(state)
            if fields.get("state") == "starting":  # the log said ready; /health may lag a beat
                fields.update(state="ready", phase="ready")
            server_state.mark_ready(state)
            fields["startup_s"] = server_state.startup_s(state)
            protocol.emit("status", **fields)
            return 0
        if not alive(pid, start):
            _, events = tail.poll()
            _emit_wait_events(events, started, clock)
            _report_crash(state)
        if time.monotonic() >= deadline:
            raise protocol.AgentError(
                "timeout", "the server is not ready after %g s (phase: %s); it is still running"
                % (timeout, tail.parser.current_phase))
        time.sleep(0.1)


def status(args: Any) -> int:
    state = read_state()
    if args.wait_ready and ours_alive(state):
        assert state is not None
        return wait_ready(state, args.timeout)
    protocol.emit("status", **status_fields(state, args.port, args.host,
                                            http=not getattr(args, "no_http", False)))
    return 0


# -- servers we did not start (agent/host/adopt.py) ----------------------------------------------

def _adopt(args: Any) -> int:
    profile = json_arg(args.profile_json, "--profile-json", dict)
    protocol.emit("adopted", **adopt.adopt(args.port, args.host, args.pid, args.proc_start,
                                           profile, args.api_key_env))
    return 0


# -- argparse --------------------------------------------------------------------------------

def add_parser(sub: Any) -> None:
    p = sub.add_parser("server", help="start, stop and watch the SGLang server we own")
    cmds = p.add_subparsers(dest="server_command", required=True)

    s = cmds.add_parser("start", help="launch a server (argv list) in its own process group")
    s.add_argument("--argv-json", required=True, help="the command line, a JSON list")
    s.add_argument("--env-json", help="extra environment, a JSON object")
    s.add_argument("--log", help="log file (relative: in the agent's cache dir)")
    s.add_argument("--workdir", help="working directory (default: the agent's cache dir)")
    s.add_argument("--port", type=int, default=30000)
    s.add_argument("--host", default="127.0.0.1", help="the server's --host (for probing)")
    s.add_argument("--profile-json", help="the profile, recorded in the state file")
    s.add_argument("--api-key-env", help="name of an env var holding the API key on this host")
    s.add_argument("--replace", action="store_true", help="stop our running server first")
    s.add_argument("--node-rank", type=int, default=0,
                   help="this node's rank in a launch across nodes (> 0: no HTTP port of its "
                   "own; ready once it joined node rank 0)")
    s.add_argument("--wait-ready", action="store_true", help="follow startup until ready")
    s.add_argument("--timeout", type=float, default=1800.0, help="for --wait-ready (s)")
    s.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, help="drain time (s)")
    s.add_argument("--gpu-wait", type=float, default=DEFAULT_GPU_WAIT_S,
                   help="how long to wait for GPU memory to be freed after a stop (s)")
    s.set_defaults(func=start)

    t = cmds.add_parser("stop", help="SIGTERM, drain, then SIGKILL the group we started")
    t.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, help="drain time (s)")
    t.add_argument("--gpu-wait", type=float, default=DEFAULT_GPU_WAIT_S)
    t.set_defaults(func=stop)

    i = cmds.add_parser("inspect", help="how the server on a port we did not start was launched")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--host", help="the server's --host")
    i.add_argument("--api-key-env", help="env var holding its API key (for /server_info)")
    i.set_defaults(func=adopt.run_inspect)

    a = cmds.add_parser("adopt", help="record a server we did not start as ours (no signal)")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--host", help="the server's --host")
    a.add_argument("--pid", type=int, required=True, help="the pid inspect reported")
    a.add_argument("--proc-start", type=int, help="its start time (inspect's proc_start)")
    a.add_argument("--profile-json", required=True, help="the launch profile written for it")
    a.add_argument("--api-key-env", help="env var holding its API key")
    a.set_defaults(func=_adopt)

    u = cmds.add_parser("status", help="stopped / starting / ready / crashed / foreign")
    u.add_argument("--port", type=int, help="port to check (default: our server's, or 30000)")
    u.add_argument("--host", help="the server's --host")
    u.add_argument("--wait-ready", action="store_true", help="if starting, follow until ready")
    u.add_argument("--no-http", action="store_true",
                   help="from the processes and the log only: no request to the server")
    u.add_argument("--timeout", type=float, default=1800.0)
    u.set_defaults(func=status)
