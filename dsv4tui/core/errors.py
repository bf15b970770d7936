"""Errors the console turns into one clear line and an exit code (never a traceback)."""

from __future__ import annotations

# Exit codes of the `dsv4tui` command (README "Exit codes").
EXIT_FAILED = 1  # the check/sanity/restart ran and failed
EXIT_CONFIG = 2  # bad config, bad usage, no such run/capture/campaign (NotFoundError)
EXIT_NO_DRIVER = 3  # no NVIDIA driver on the host
EXIT_CONNECT = 4  # unknown host, DNS, refused, timeout, link dropped
EXIT_AUTH = 5  # authentication failed
EXIT_HOST_KEY = 6  # unknown or changed host key
EXIT_REMOTE = 7  # remote python missing / agent could not run
EXIT_BUSY = 8  # another restart, sweep or campaign holds the host's lock
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ConfigError(UserError):
    exit_code = EXIT_CONFIG


class NotFoundError(UserError):
    """What the user named is not there: a run id or label, a kernel capture, a campaign.
    Bad usage (exit 2), as is a file that does not exist."""

    exit_code = EXIT_CONFIG


class ConnectError(UserError):
    exit_code = EXIT_CONNECT


class AuthError(UserError):
    exit_code = EXIT_AUTH


class HostKeyError(UserError):
    exit_code = EXIT_HOST_KEY

    def __init__(self, message: str, *, changed: bool, fingerprint: str | None = None) -> None:
        super().__init__(message)
        self.changed = changed
        self.fingerprint = fingerprint


class RemoteError(UserError):
    exit_code = EXIT_REMOTE


class AgentFailed(UserError):
    """The agent ended with an ``error`` event."""

    def __init__(self, kind: str, message: str, exit_code: int = EXIT_FAILED,
                 event: dict | None = None) -> None:
        super().__init__(message, exit_code)
        self.kind = kind
        self.event = event or {}
