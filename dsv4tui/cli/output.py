"""Printing helpers shared by the CLI commands."""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def finite(obj: Any) -> Any:
    """``obj`` with every NaN / Infinity float as None: JSON has no such numbers."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    """Exact JSON (RFC 8259): a non-finite float is printed as null, never ``Infinity``."""
    json.dump(finite(obj), sys.stdout, indent=2, default=str, allow_nan=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def ask(question: str) -> bool:
    """A yes/no question on the terminal; end of input is no."""
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
