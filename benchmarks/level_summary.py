"""Print one line per level (and the sweep's end) of an agent sweep's JSON lines.

    python benchmarks/level_summary.py sweep.jsonl [more.jsonl ...]
"""

from __future__ import annotations

import json
import sys


def line(e: dict) -> str:
    g = e.get("goodput") or {}
    sat = e.get("saturation") or {}
    lag = (e.get("send_lag_ms") or {}).get("p99")
    return (f"C={e.get('concurrency')} rate={e.get('rate')} n={e['requests']} "
            f"ok={e['completed']} err={e['errors']} workers={e.get('workers')} "
            f"tok/s={e['output_tok_s']:.1f} TTFT p50={e['ttft_ms']['p50']:.1f} ms "
            f"TPOT p50={e['tpot_ms']['p50']:.2f} ms in_tok={e.get('input_tokens_mean')} "
            f"out_tok={e.get('output_tokens')} warmup={e.get('warmup_requests')} "
            f"goodput={g.get('share')} lag_p99={lag} saturated={sat.get('saturated')} "
            f"({sat.get('source')}: offered {sat.get('offered_rate')} achieved "
            f"{sat.get('achieved_rate')}) status={e['status']}")


def main() -> int:
    for path in sys.argv[1:]:
        print(f"# {path}")
        with open(path) as f:
            for raw in f:
                e = json.loads(raw)
                if e.get("type") == "level":
                    print(line(e))
                elif e.get("type") in ("sweep", "error"):
                    print(json.dumps({k: e.get(k) for k in ("type", "status", "seed", "message")
                                      if k in e}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
