"""What one screen switch costs with nothing else going on.

The tests' frozen app (tests/snapshot_apps/frozen.py: no host, frozen model) runs headless at
160x48; keys 1-5 go in the way the terminal driver sends them, one every 0.2 s, in a fixed
order. For each key: the ms to the first frame composed after it (each frame also turned into
the bytes a terminal would get), and the console's CPU from the key to 0.2 s later (the
switch and whatever frames follow it). The garbage collector is frozen and off while keys
go in (the live app's gc_policy holds full passes back while keys come). The first round of
keys (first visits) is not counted.

    python benchmarks/ui_switch_quiet.py [--rounds 8] [--json]

This VM's speed drifts by up to ±30 % within an hour: compare two trees by running each in
turn, not against a number written down earlier. Private Textual names, here only
(benchmarks/): the frame clock ``App._display``, ``App._driver``, the compositor's update
class.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from snapshot_apps.frozen import frozen_app  # noqa: E402
from textual import events  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402  (private; benchmarks only)

ORDER = "12534"  # every body after every other kind: dashboard, logs, runs, launch, bench
NAMES = {"1": "dashboard", "2": "logs", "3": "launch", "4": "bench", "5": "runs"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


async def measure(rounds: int) -> dict[str, Any]:
    app: Any = frozen_app("dashboard", "dark")
    display = app._display
    pending: dict[str, float] = {}
    first: list[tuple[str, float]] = []

    def timed_display(screen: Any, update: Any) -> None:
        if isinstance(update, CompositorUpdate):
            update.render_segments(app.console)  # the bytes a terminal would get
        display(screen, update)
        if update is not None and "t0" in pending:
            first.append((str(pending.pop("key")), (time.perf_counter() - pending.pop("t0"))
                          * 1000))

    app._display = timed_display
    cpu: list[tuple[str, float]] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(1.0)
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            for key in ORDER * (rounds + 1):
                c0 = time.process_time()
                pending.update(key=key, t0=time.perf_counter())
                app._driver.send_message(events.Key(key, key))
                while "t0" in pending:
                    await asyncio.sleep(0.001)
                await asyncio.sleep(0.2)
                cpu.append((key, (time.process_time() - c0) * 1000))
        finally:
            gc.enable()
            gc.unfreeze()
    skip = len(ORDER)
    frames, cpus = first[skip:], cpu[skip:]
    out: dict[str, Any] = {
        "keys": len(frames),
        "first_frame_ms": {"p50": statistics.median(t for _, t in frames),
                           "p90": pct([t for _, t in frames], 90)},
        "cpu_per_key_ms": {"p50": statistics.median(c for _, c in cpus),
                           "p90": pct([c for _, c in cpus], 90)},
        "by_body_p50_ms": {NAMES[k]: statistics.median(t for kk, t in frames if kk == k)
                           for k in sorted(NAMES)},
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of the five keys")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()
    out = asyncio.run(measure(max(1, args.rounds)))
    ff, cp = out["first_frame_ms"], out["cpu_per_key_ms"]
    print(f"### ui_switch_quiet: {out['keys']} switches, frozen app 160x48, no load")
    print(f"- key -> first frame: p50 {ff['p50']:.1f} ms, p90 {ff['p90']:.1f} ms")
    print(f"- console CPU per key (key to 0.2 s after): p50 {cp['p50']:.1f} ms, "
          f"p90 {cp['p90']:.1f} ms")
    print("- first frame p50 by body: " + ", ".join(
        f"{name} {ms:.1f}" for name, ms in out["by_body_p50_ms"].items()))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
