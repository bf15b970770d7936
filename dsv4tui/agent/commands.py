"""The agent's command line: a parser of the command modules given, each of which exposes
``add_parser(subparsers)`` (registering its sub-command and setting ``func(args) -> int``).
``__main__`` builds it of every command; the campaign runner of the few it calls itself
(bench, server), so that it parses their arguments as the agent does."""

from __future__ import annotations

import argparse
from typing import Any, Iterable


class ArgumentError(Exception):
    """A command line the parser refuses (the message, never a usage text on stderr)."""


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage, so errors become events."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgumentError(message)


def build_parser(modules: Iterable[Any]) -> argparse.ArgumentParser:
    parser = Parser(prog="dsv4tui-agent")
    parser.add_argument("--cancel-on-eof", action="store_true",
                        help="treat EOF on stdin as cancel (set by the console on streams)")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in modules:
        module.add_parser(sub)
    return parser
