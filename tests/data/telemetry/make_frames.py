"""Regenerate ``fake_nvml_h200x8.jsonl``: 60 agent frames from the NVML code path over the
fake libnvidia-ml (``fake_nvml.py``) -- NOT hardware data; fixtures for the panel snapshots.

    python tests/data/telemetry/make_frames.py
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from dsv4tui.agent.host.nvml_source import NvmlSource  # noqa: E402
from dsv4tui.agent.host.telemetry import stream  # noqa: E402


def load_fake():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fake_nvml", HERE / "fake_nvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fake_nvml"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    fk = load_fake()
    clock = fk.FakeClock(5000.0)
    lib = fk.FakeNvmlLib(clock=clock)
    for i, gpu in enumerate(lib.gpus):
        gpu.mem_used_mib = 0 if i == 7 else 126_400 + 37 * i
        if i < 7:
            gpu.processes = [(41200 + i, gpu.mem_used_mib * fk.MIB - 8 * fk.MIB)]
        lib.process_names[41200 + i] = "/usr/bin/python3"
    # tick -> [(gpu, workload)]
    plan = {5: [(i, "moe_cuda_cores") for i in range(4)] + [(6, "fp32_elementwise")],
            12: [(4, "bf16_matmul"), (5, "fp32_matmul_no_tf32")],
            30: [(5, "bf16_matmul")], 44: [(4, "idle")], 50: [(4, "bf16_matmul")]}
    events: list[dict] = []
    tick = {"n": 0}

    def sleep(dt: float) -> None:
        clock.advance(dt)

    def emit(type_: str, **fields: object) -> None:
        fields["time"] = 1764460000.0 + tick["n"]  # frozen wall clock for the fixtures
        events.append({"type": type_, "v": 1, **fields})
        tick["n"] += 1
        for gpu, workload in plan.get(tick["n"], []):
            lib.set_workload(gpu, workload)

    with fk.installed(lib) as nv:
        source = NvmlSource(nv)
        source.open(1.0)
        try:
            stream(source, 1.0, count=60, processes_every=5.0, emit=emit, clock=clock,
                   sleep=sleep)
        finally:
            source.close()
    out = HERE / "fake_nvml_h200x8.jsonl"
    with out.open("w") as f:
        f.write(json.dumps({"type": "meta", "note": "NVML fake (tests/data/telemetry/"
                            "fake_nvml.py), not hardware data"}) + "\n")
        for ev in events:
            f.write(json.dumps(ev, separators=(",", ":")) + "\n")
    print(f"wrote {len(events)} frames to {out}")


if __name__ == "__main__":
    main()
