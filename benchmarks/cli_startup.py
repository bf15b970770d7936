#!/usr/bin/env python3
"""How long ``dsv4tui --version``, ``--help`` and a few commands take to answer: the whole
process, interpreter start-up included (``python -m dsv4tui ...``, this checkout), median and
best of ``--repeat`` runs, next to a bare ``python -c pass`` for scale. Goal: ``--version``
and ``--help`` in <= 0.3 s. Also prints which heavy libraries each command imported
(``python -X importtime``): ``--version`` and ``--help`` should import none of them.

    python benchmarks/cli_startup.py [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("asyncssh", "pydantic", "textual", "httpx")
COMMANDS = (["--version"], ["--help"], ["runs", "--help"], ["config", "path"])


def _env(tmp: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    env["DSV4TUI_DATA_DIR"] = tmp
    env.pop("DSV4TUI_CONFIG", None)
    return env


def _time(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        out.append(time.perf_counter() - t0)
    return out


def _imported(args: list[str], env: dict[str, str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "dsv4tui", *args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:")}
    return [h for h in HEAVY if h in names]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(tmp)
        base = _time([sys.executable, "-c", "pass"], env, args.repeat)
        rows.append({"command": "python -c pass", "median_s": statistics.median(base),
                     "best_s": min(base), "heavy_imports": []})
        for cmd in COMMANDS:
            times = _time([sys.executable, "-m", "dsv4tui", *cmd], env, args.repeat)
            rows.append({"command": "dsv4tui " + " ".join(cmd),
                         "median_s": statistics.median(times), "best_s": min(times),
                         "heavy_imports": _imported(cmd, env)})
    if args.json:
        print(json.dumps({"repeat": args.repeat, "python": sys.version.split()[0],
                          "rows": rows}, indent=2))
        return 0
    print(f"{'command':<24} {'median s':>9} {'best s':>7}  heavy imports")
    for r in rows:
        print(f"{r['command']:<24} {r['median_s']:>9.3f} {r['best_s']:>7.3f}  "
              f"{', '.join(r['heavy_imports']) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
