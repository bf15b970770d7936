"""AgentRunner: runs agent commands on a host and turns their JSON lines into events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from dsv4tui.agent.protocol import EXIT_BUSY as AGENT_EXIT_BUSY
from dsv4tui.agent.protocol import parse_event
from dsv4tui.core.errors import EXIT_BUSY, EXIT_CONNECT, AgentFailed, ConnectError
from dsv4tui.core.hosts.session import HostSession

_CANCEL_GRACE_S = 5.0


def _stderr_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class AgentRunner:
    """``prefix`` is how to start the agent on the host (interpreter + zipapp or -m)."""

    def __init__(self, session: HostSession, prefix: list[str],
                 env: dict[str, str] | None = None) -> None:
        self.session = session
        self.prefix = list(prefix)
        self.env = dict(env or {})

    def argv(self, *args: str, cancel_on_eof: bool = False) -> list[str]:
        return [*self.prefix, *(["--cancel-on-eof"] if cancel_on_eof else []), *args]

    def _failure(self, events: list[dict[str, Any]], code: int | None, stderr: str) -> AgentFailed:
        exit_code = code if code is not None and 0 < code < 128 else 1
        if exit_code == AGENT_EXIT_BUSY:  # the agent's 4 is busy; the console's 4 is the link
            exit_code = EXIT_BUSY
        for ev in events:
            if ev.get("type") == "error":
                kind = str(ev.get("kind", "error"))
                # the agent could not reach the server (refused, DNS, timeout): the console's
                # connection problem, as when the console itself cannot reach a host
                code_for = {"busy": EXIT_BUSY, "connect": EXIT_CONNECT}
                return AgentFailed(kind, str(ev.get("message", "")),
                                   code_for.get(kind, exit_code), ev)
        detail = _stderr_line(stderr) or "no output"
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return AgentFailed("exit", f"{self.session.name}: agent {how}: {detail}", exit_code)

    async def call(self, *args: str, timeout: float | None = None) -> list[dict[str, Any]]:
        """Run an agent command to completion; its events, or AgentFailed/ConnectError."""
        try:
            res = await self.session.run(self.argv(*args), env=self.env, timeout=timeout)
        except TimeoutError:
            raise AgentFailed("timeout", f"{self.session.name}: agent {args[0]} timed out "
                              f"after {timeout:g} s") from None
        events = [ev for line in res.stdout.splitlines() if (ev := parse_event(line))]
        if res.exit_code is None:
            raise ConnectError(f"{self.session.name}: connection lost during agent {args[0]}")
        if res.exit_code != 0 or any(ev.get("type") == "error" for ev in events):
            raise self._failure(events, res.exit_code, res.stderr)
        return events

    async def events(self, *args: str) -> AsyncIterator[dict[str, Any]]:
        """Stream an agent command's events. Leaving the loop early cancels the command."""
        proc = await self.session.start(self.argv(*args, cancel_on_eof=True), env=self.env)
        errors: list[dict[str, Any]] = []
        finished = False
        try:
            while True:
                line = await proc.readline()
                if not line:
                    break
                ev = parse_event(line)
                if ev is None:
                    continue
                if ev.get("type") == "error":
                    errors.append(ev)
                    continue
                yield ev
            code = await proc.wait(timeout=10.0)
            finished = True
            if errors or (code not in (0, 130) and code is not None):
                raise self._failure(errors, code, proc.stderr_tail())
            if code is None:
                raise ConnectError(f"{self.session.name}: connection lost during agent {args[0]}")
        finally:
            if not finished:
                await _cancel(proc)


async def _cancel(proc: Any) -> None:
    """Close stdin (the agent's cancel signal), give it a moment, then kill."""
    with contextlib.suppress(Exception):
        await asyncio.shield(proc.close_stdin())
        if await asyncio.shield(proc.wait(timeout=_CANCEL_GRACE_S)) is None:
            proc.kill()
