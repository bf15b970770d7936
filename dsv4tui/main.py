"""The ``dsv4tui`` command line. Each command group lives in ``dsv4tui/cli/``.

Every command module exposes ``register(sub)``; it adds its sub-parser(s) and sets
``func(args) -> int``. Errors the user can fix are :class:`UserError` subclasses and print one
line on stderr with their exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from dsv4tui import __version__
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_INTERRUPTED, UserError

# Every command: its name, the module that registers it (``dsv4tui/<module>.py``, whose
# ``register(sub)`` adds its parser) and the line ``dsv4tui --help`` shows for it. Only the
# module of the command given is imported: ``--version`` and ``--help`` import none of them
# (no asyncssh, pydantic or textual), and each command pays only for its own imports.
COMMANDS = (
    ("config", "cli.config_cmd", "check the config file or print its path"),
    ("hosts", "cli.hosts_cmd", "list the hosts you can connect to"),
    ("check", "cli.check", "connect to HOST, deploy the agent and report what it has"),
    ("trust", "cli.trust", "add the SSH host keys on the way to HOST to ~/.ssh/known_hosts "
     "after confirming"),
    ("gpus", "cli.gpus", "live GPU telemetry of a host, tensor-pipe activity included"),
    ("server", "cli.server", "start, stop, restart and check the SGLang server of a host"),
    ("logs", "cli.logs", "print or follow the server log of a host"),
    ("parse-log", "cli.parse_log", "parse an SGLang server log offline"),
    ("sanity", "cli.sanity", "ask the sanity prompts; exit 0 when every answer matches"),
    ("sweep", "cli.sweep", "sanity, then a concurrency sweep, saved as a run"),
    ("campaign", "cli.campaign", "run a campaign of launch variants on a host, unattended, "
     "and collect it"),
    ("runs", "cli.runs", "list, show, compare, export and delete saved runs"),
    ("store", "cli.store_cmd", "the run store file: back it up, see where it is"),
    ("kernels", "cli.kernels", "kernel capture of the server under a steady load: top "
     "kernels, families, tensor cores; stored with a run"),
    ("roofline", "cli.roofline", "memory-bound decode ceiling per concurrency, and how far a "
     "run is from it"),
    ("demo", "tui.commands.demo", "the dashboard against a simulated 8-GPU host (nothing to "
     "set up)"),
    ("connect", "tui.commands.connect", "open the dashboard for HOST (a config host, an "
     "~/.ssh/config alias, user@host[:port], local or demo); several hosts: the Fleet view of "
     "them all"),
    ("serve", "tui.commands.serve", "the dashboard in a browser (textual-serve): each tab its "
     "own dashboard, behind a secret token in the URL"),
    ("fleet", "cli.fleet", "every host at a glance: GPUs, server, last run (connected in "
     "parallel)"),
)
_VALUED = ("--config",)  # the top-level options that take a value


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not a top-level option (nor an
    option's value), when it is one of COMMANDS."""
    words = iter(argv)
    for word in words:
        if word == "--":
            word = next(words, "")
        elif word.startswith("-"):
            name = word.split("=", 1)[0]
            # argparse takes a unique prefix of a long option (--conf PATH)
            if "=" not in word and len(name) > 2 and any(v.startswith(name) for v in _VALUED):
                next(words, None)
            continue
        return word if any(word == c[0] for c in COMMANDS) else None
    return None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "dsv4tui: error: " once; the sub-command says where it went wrong
        where = self.prog.removeprefix("dsv4tui").strip()
        raise UserError(f"{where}: {message}" if where else message, EXIT_CONFIG)


class _WithHelp:
    """The subparsers a command's ``register`` adds its parser to, with its help line."""

    def __init__(self, sub: Any, help_: str) -> None:
        self.sub, self.help = sub, help_

    def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        return self.sub.add_parser(name, help=self.help, **kw)  # type: ignore[no-any-return]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with ``command``'s arguments (its module imported); every other command
    is there by name and help line only."""
    import importlib

    parser = _Parser(prog="dsv4tui", description="A control room for bringing up LLM servers "
                     "(SGLang) on GPU hosts: backend switching, restarts, sanity gates, sweeps, "
                     "GPU telemetry with tensor-pipe activity.",
                     epilog="Exit codes: 0 ok, 1 failed (sanity, restart...), 2 bad config/usage "
                     "or no such run/capture/campaign, 3 no NVIDIA driver (gpus; check reports "
                     "it as absent, exit 0), 4 connection problem "
                     "(host or server), 5 auth failed, 6 host key, 7 remote python/agent, 8 busy "
                     "(another restart/sweep/campaign holds the host), 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"dsv4tui {__version__}")
    parser.add_argument("--config", metavar="PATH", help="config file (default: platformdirs "
                        "user config dir, or $DSV4TUI_CONFIG)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_ in COMMANDS:
        if name == command:
            importlib.import_module(f"dsv4tui.{module}").register(_WithHelp(sub, help_))
        else:
            sub.add_parser(name, help=help_)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(command_named(words))
        args = parser.parse_args(words)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_CONFIG
        return int(args.func(args) or 0)
    except UserError as err:
        from dsv4tui.core.campaign.labels import safe_text

        # one line, whatever a server or a file put in the message
        message = safe_text(err.message).removeprefix("dsv4tui: error: ")
        print(f"dsv4tui: error: {message}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("dsv4tui: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
