"""The watcher of a host made of several nodes: one rank down -> every rank stopped.

A real SGLang rank whose peer died waits in NCCL until a timeout (minutes, or for ever); so
after ``server start`` brings a group up, a small console-side process (its own session, so it
outlives the command) asks every node for its server's status once a second. When a node's
server has crashed or exited while others still run, it writes what that node said (its state,
exit code or signal, its error lines) to ``groups/HOST.failure.json`` in the data dir, stops
every node (the agents' ``server stop``: by pid/pgid, only what we started) and exits. It exits
too when every node is stopped. ``server stop`` ends it first (by its pid, checked by its
command line and start time), so a stop is never taken for a failure.

Run as ``python -m dsv4tui.core.nodes.watch HOST [--config PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dsv4tui.agent.host import procs
from dsv4tui.core import paths
from dsv4tui.core.nodes import fanout

POLL_S = 1.0
STOP_GRACE_S = 5.0
LOST_POLLS = 3  # a node unreachable this many polls in a row: connect again
RECONNECT_S = 5.0
GIVE_UP_S = 1800.0  # nothing reachable for this long: the watcher ends
_RUNNING = ("starting", "ready", "stopping")
_DOWN = ("crashed", "stopped")


def _dir() -> Path:
    path = paths.data_dir() / "groups"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _safe(host: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _is_our_watcher(rec: dict[str, Any], host: str) -> bool:
    pid, start = int(rec.get("pid") or 0), rec.get("start")
    if not pid or start is None or not procs.alive(pid, start):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"dsv4tui.core.nodes.watch" in argv and host.encode() in argv


def last_failure(host: str) -> dict[str, Any] | None:
    """What the watcher recorded when it stopped the group for a failed node, if it did."""
    return _read(_dir() / f"{_safe(host)}.failure.json")


def end(host: str, timeout: float = 3.0) -> bool:
    """End the group's watcher (ours: checked by pid, start time and command line)."""
    path = _dir() / f"{_safe(host)}.watch.json"
    rec = _read(path)
    if not rec or not _is_our_watcher(rec, host):
        return False
    pid = int(rec["pid"])
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while procs.alive(pid, rec["start"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        path.unlink()
    return True


def spawn(host: str, config: str | None = None) -> int:
    """Start the group's watcher (ending an older one first); its pid."""
    end(host)
    d = _dir()
    with contextlib.suppress(OSError):
        (d / f"{_safe(host)}.failure.json").unlink()
    argv = [sys.executable, "-m", "dsv4tui.core.nodes.watch", host]
    if config:
        argv += ["--config", str(Path(config).expanduser())]
    with open(d / f"{_safe(host)}.watch.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
    _write(d / f"{_safe(host)}.watch.json",
           {"pid": proc.pid, "start": procs.proc_start(proc.pid), "host": host,
            "since": time.time()})
    return proc.pid


def failed_node(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The node whose server is down while another still runs (the first such), else None."""
    if not any(n.get("state") in _RUNNING for n in nodes):
        return None
    return next((n for n in nodes if n.get("state") in _DOWN), None)


def root_node(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of nodes that all went down, the one that went first in cause: not one that only died
    of another's NCCL error."""
    crashed = [n for n in nodes if n.get("state") == "crashed"]

    def nccl(n: dict[str, Any]) -> bool:
        return any("nccl" in str(e).lower() for e in n.get("last_errors") or [])

    return min(crashed, key=lambda n: (nccl(n), n.get("rank") or 0), default=None)


def failure_record(node: dict[str, Any]) -> dict[str, Any]:
    code, sig = node.get("exit_code"), node.get("signal")
    if node.get("state") == "crashed":
        what = "crashed (" + (f"exit code {code}" if code is not None else
                              f"signal {sig}" if sig else "exit status unknown") + ")"
    else:
        what = "stopped while the other nodes ran"
    errors = list(node.get("last_errors") or []) or [t for t in node.get("tail") or [] if t][-5:]
    return {"node": node.get("node"), "rank": node.get("rank"), "state": node.get("state"),
            "exit_code": code, "signal": sig, "what": what, "errors": errors,
            "when": time.strftime("%H:%M:%S"), "time": time.time()}


async def watch(host_name: str, config: Path | None) -> int:
    from dsv4tui.core import config as cfg
    from dsv4tui.core.hosts.resolve import connect, host_spec

    settings, _ = cfg.load(config)
    spec = host_spec(host_name, settings)
    if not spec.group:
        print(f"{host_name} is not a host made of nodes", file=sys.stderr)
        return 2
    names = [s.name for s in spec.group]
    down_since: float | None = None
    while True:  # a lost link: connect again (a node's server runs on without us)
        try:
            host = await connect(spec)
        except Exception as exc:
            down_since = down_since or time.monotonic()
            if time.monotonic() - down_since > GIVE_UP_S:
                print(f"{time.strftime('%H:%M:%S')} giving up: {exc}", file=sys.stderr)
                return 1
            await asyncio.sleep(RECONNECT_S)
            continue
        try:
            done = await _watch_connected(host, host_name, names)
        except Exception as exc:  # a node not reachable, a link dropped
            print(f"{time.strftime('%H:%M:%S')} {exc}; connecting again", file=sys.stderr,
                  flush=True)
            done = None
        finally:
            await host.session.close()
        if done is not None:
            return done
        down_since = down_since or time.monotonic()
        if time.monotonic() - down_since > GIVE_UP_S:
            return 1
        await asyncio.sleep(RECONNECT_S)


async def _watch_connected(host: Any, host_name: str, names: list[str]) -> int | None:
    """Poll every node until the group is down (its exit code) or a node is unreachable
    for LOST_POLLS polls in a row (None: connect again)."""
    lost = 0
    async with fanout.Nodes(host) as nodes:
        while True:
            status = await fanout.node_status(nodes, names, None, host.config,
                                                     http=False)
            lost = lost + 1 if any(n.get("error") for n in status) else 0
            if lost >= LOST_POLLS:
                return None
            bad = failed_node(status)
            if bad is not None:
                record = failure_record(bad)
                print(f"{time.strftime('%H:%M:%S')} node {bad['node']} (rank {bad['rank']}) "
                      f"{record['what']}: stopping every node", flush=True)
                _write(_dir() / f"{_safe(host_name)}.failure.json", record)
                stopped = await fanout.stop_all(nodes, names, STOP_GRACE_S)
                record["stopped"] = fanout.group_stopped(stopped)
                _write(_dir() / f"{_safe(host_name)}.failure.json", record)
                return 0
            if all(n.get("state") in _DOWN for n in status):
                crashed = root_node(status)
                if crashed is not None:  # they all went down together (an NCCL error)
                    _write(_dir() / f"{_safe(host_name)}.failure.json",
                           failure_record(crashed))
                return 0
            await asyncio.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dsv4tui.core.nodes.watch")
    p.add_argument("host")
    p.add_argument("--config")
    args = p.parse_args(argv)
    try:
        return asyncio.run(watch(args.host, Path(args.config) if args.config else None))
    except Exception as exc:  # one line in its log, never a traceback
        print(f"{time.strftime('%H:%M:%S')} watcher ended: {exc}", file=sys.stderr)
        return 1
    finally:
        rec = _read(_dir() / f"{_safe(args.host)}.watch.json")
        if rec and rec.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                (_dir() / f"{_safe(args.host)}.watch.json").unlink()


if __name__ == "__main__":
    sys.exit(main())
