"""Agent entry point: ``python -m dsv4tui.agent CMD ...`` or ``python3 agent.pyz CMD ...``.

Each command module exposes ``add_parser(subparsers)``, which registers its sub-command and
sets ``func`` (``func(args) -> int``) on it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import List, Optional

from dsv4tui.agent import commands, protocol


def build_parser() -> argparse.ArgumentParser:
    from dsv4tui.agent.bench import sweep as bench
    from dsv4tui.agent.campaign import command as campaign
    from dsv4tui.agent.host import hello, logs, server, server_metrics, target, telemetry
    from dsv4tui.agent.kernels import capture as kernels

    return commands.build_parser((hello, telemetry, server, logs, bench, kernels, campaign,
                                  target, server_metrics))


def _watch_stdin() -> None:
    """When the console closes our stdin (cancel, or the SSH link died), stop like Ctrl-C."""

    def watch() -> None:
        # Read the raw fd: a thread blocked in sys.stdin.buffer holds its lock, and the
        # interpreter aborts at exit ("Fatal Python error") if a command ends on its own.
        try:
            while os.read(sys.stdin.fileno(), 4096):
                pass
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except commands.ArgumentError as exc:
        protocol.emit_error(protocol.AgentError("usage", str(exc), protocol.EXIT_USAGE))
        return protocol.EXIT_USAGE
    # SIGTERM ends the command like Ctrl-C: cleanly, with a final event.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.cancel_on_eof:
        _watch_stdin()
    try:
        return int(args.func(args) or 0)
    except protocol.AgentError as err:
        protocol.emit_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        protocol.emit("cancelled")
        return 130
    except BrokenPipeError:
        return 141
    except Exception as exc:  # the console must get an event, not a traceback
        protocol.emit_error(protocol.AgentError("internal", "%s: %s" % (type(exc).__name__, exc)))
        return protocol.EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
