"""Printing helpers shared by the CLI commands."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def ask(question: str) -> bool:
    """A yes/no question on the terminal; end of input is no."""
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
