"""The HostSession protocol: run argv lists on a host, stream their output, upload files."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None: the link dropped before the command ended
    stdout: str
    stderr: str


class StreamProcess(Protocol):
    """A long-lived command whose stdout is read line by line."""

    async def readline(self) -> str:
        """The next stdout line ('' at end of stream)."""
        ...

    async def close_stdin(self) -> None:
        """Close the command's stdin: the agent treats that as 'cancel'."""
        ...

    async def wait(self, timeout: float | None = None) -> int | None:
        """Exit code; None if the link dropped or the timeout passed."""
        ...

    def kill(self) -> None: ...

    def stderr_tail(self) -> str:
        """The last stderr text seen (for error messages)."""
        ...


class HostSession(Protocol):
    """One connection to a host. argv lists only, never shell strings."""

    name: str

    @property
    def is_local(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    async def run(self, argv: list[str], *, env: dict[str, str] | None = None,
                  timeout: float | None = None) -> CommandResult: ...

    async def start(self, argv: list[str], *, env: dict[str, str] | None = None) -> StreamProcess: ...

    async def upload(self, local: Path, remote: str) -> None: ...

    async def remote_exists(self, remote: str) -> bool: ...

    async def wait_closed(self) -> None:
        """Return when the connection is gone (never, for a local session)."""
        ...

    async def close(self) -> None: ...


class ConnectionState(enum.StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    LOST = "lost"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    CLOSED = "closed"
