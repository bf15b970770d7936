"""The ``dsv4tui`` command line. Each command group lives in ``dsv4tui/cli/``.

Every command module exposes ``register(sub)``; it adds its sub-parser(s) and sets
``func(args) -> int``. Errors the user can fix are :class:`UserError` subclasses and print one
line on stderr with their exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dsv4tui import __version__
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_INTERRUPTED, UserError

COMMAND_MODULES = (
    "cli.config_cmd", "cli.hosts_cmd", "cli.check", "cli.trust", "cli.gpus", "cli.server",
    "cli.logs", "cli.parse_log", "cli.sanity", "cli.sweep", "cli.campaign", "cli.runs",
    "cli.store_cmd", "cli.kernels", "cli.roofline", "tui.commands.demo", "tui.commands.connect",
    "tui.commands.serve", "cli.fleet",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prints "dsv4tui: error: " once; the sub-command says where it went wrong
        where = self.prog.removeprefix("dsv4tui").strip()
        raise UserError(f"{where}: {message}" if where else message, EXIT_CONFIG)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(prog="dsv4tui", description="A control room for bringing up LLM servers "
                     "(SGLang) on GPU hosts: backend switching, restarts, sanity gates, sweeps, "
                     "GPU telemetry with tensor-pipe activity.",
                     epilog="Exit codes: 0 ok, 1 failed (sanity, restart...), 2 bad config/usage, "
                     "3 no NVIDIA driver, 4 connection problem, 5 auth failed, 6 host key, "
                     "7 remote python/agent, 8 busy (another restart/sweep/campaign holds the host), "
                     "130 interrupted.")
    parser.add_argument("--version", action="version", version=f"dsv4tui {__version__}")
    parser.add_argument("--config", metavar="PATH", help="config file (default: platformdirs "
                        "user config dir, or $DSV4TUI_CONFIG)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"dsv4tui.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
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
