"""The built-in sanity gate: "What is 17*23? Number only." must answer 391 -- the one default
case, for the agent's ``bench sanity`` and the console's config (``core.config.DEFAULT_SANITY``
is built from it). Stdlib only (Python 3.9)."""

from __future__ import annotations

from typing import Any, Dict, List

DEFAULT_CASES: List[Dict[str, Any]] = [
    {"name": "arith-17x23", "prompt": "What is 17*23? Number only.",
     "expect": r"^\s*391\s*$", "max_tokens": 24, "temperature": 0.0}]
