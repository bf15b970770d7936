"""LocalSession: this machine as a host, through asyncio subprocesses (no SSH)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

from dsv4tui.core.hosts.session import CommandResult

_STDERR_KEEP = 4096


class LocalProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._stderr = b""
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(4096):
            self._stderr = (self._stderr + chunk)[-_STDERR_KEEP:]

    async def readline(self) -> str:
        assert self._proc.stdout is not None
        try:
            line = await self._proc.stdout.readline()
        except ValueError:  # a line over the stream limit: skip it rather than die
            return "\n"
        return line.decode("utf-8", "replace")

    async def close_stdin(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                await self._proc.stdin.wait_closed()

    async def wait(self, timeout: float | None = None) -> int | None:
        try:
            code = await asyncio.wait_for(self._proc.wait(), timeout)
        except TimeoutError:
            return None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._stderr_task, 1.0)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")


class LocalSession:
    """Runs commands on this machine. ``env`` entries are added to this process's env."""

    is_local = True

    def __init__(self, name: str = "local", base_env: dict[str, str] | None = None) -> None:
        self.name = name
        self.base_env = dict(base_env or {})
        self._closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update(self.base_env)
        merged.update(env or {})
        return merged

    async def run(self, argv: list[str], *, env: dict[str, str] | None = None,
                  timeout: float | None = None) -> CommandResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self._env(env))
        except FileNotFoundError:
            return CommandResult(127, "", f"{argv[0]}: command not found")
        except OSError as exc:  # a directory, not executable, ...: as a shell reports it
            return CommandResult(126, "", f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except BaseException:  # a timeout, or the caller cancelled (the app quits)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                # reaped and its pipes closed, not leaked (bounded: a grandchild could hold
                # the pipes open)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 2.0)
            raise
        return CommandResult(proc.returncode, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"))

    async def start(self, argv: list[str], *, env: dict[str, str] | None = None) -> LocalProcess:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self._env(env), limit=16 * 1024 * 1024)
        return LocalProcess(proc)

    async def upload(self, local: Path, remote: str) -> None:
        dest = Path(remote).expanduser()
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        shutil.copyfile(local, tmp)
        os.replace(tmp, dest)

    async def remote_exists(self, remote: str) -> bool:
        return Path(remote).expanduser().exists()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._closed.set()
