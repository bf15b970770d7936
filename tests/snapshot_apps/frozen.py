"""The dashboard with frozen data: no host, a frozen clock, fixed numbers (snapshot tests).

``frozen_app(mode, theme)`` returns a Dsv4App showing the demo host mid-campaign: server
ready on MXFP4/triton, 8 simulated GPUs, a log tail with a warning and a traceback, the
sanity gate passed, a sweep in its second level, four stored runs (two marked) and their
comparison. Run it by hand: ``python tests/snapshot_apps/frozen.py [MODE] [THEME]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dsv4tui.core.config import Settings
from dsv4tui.core.hosts.demo import demo_host_config
from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.core.view import model as m
from dsv4tui.tui.app import Dsv4App

T0 = 1_764_460_000.0  # the frozen "now" (wall and monotonic)
DATA = Path(__file__).resolve().parent.parent / "data"


def _frames(telemetry: HostTelemetry) -> None:
    for k in range(40):
        t = T0 - 40 + k + 1
        busy = k >= 12
        gpus = []
        for i in range(8):
            gpus.append({
                "index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "util_gpu": (97 + (i % 3)) if busy else 0,
                "util_mem": 30 if busy else 0,
                "mem_used_mib": 86_140 + 64 * i, "mem_total_mib": 97_887,
                "power_w": (412.0 + 7 * i) if busy else 88.0, "power_limit_w": 600.0,
                "temp_c": 61 + i if busy else 38, "sm_clock_mhz": 2430 if busy else 720,
                "sm_clock_max_mhz": 2617, "pstate": "P0", "gpm": True,
                "tensor_active": (0.8 + 0.1 * (i % 2)) if busy else 0.0,
                "sm_active": 92.0 if busy else 0.0, "dram_active": 35.0 if busy else 0.0,
            })
        ev = {"type": "frame", "seq": k, "time": t, "interval": 1.0, "source": "simulated",
              "driver": "580.95.05", "gpus": gpus}
        telemetry.add(Frame.from_event(ev), received=t)


def _logs(model: m.UiModel) -> None:
    text = (DATA / "sglang_logs" / "dsv4_nvfp4_marlin_tp8.log").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    model.logs.extend(lines[:-2])
    model.logs.extend([
        "[2026-03-02 09:17:05 TP3] WARNING: cuda graph capture skipped for bs=80 (max bs 64)",
        "[2026-03-02 09:17:06 TP0] Decode batch, #running-req: 16, #full token: 3712, full "
        "token usage: 0.00, #swa token: 3712, swa token usage: 0.03, cuda graph: True, gen "
        "throughput (token/s): 28.70, #queue-req: 0",
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2331, in run',
        "    self.event_loop_overlap()",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1968, unhandled cuda error",
        "[2026-03-02 09:17:09 TP0] Decode batch, #running-req: 16, #full token: 3968, full "
        "token usage: 0.00, #swa token: 3968, swa token usage: 0.03, cuda graph: True, gen "
        "throughput (token/s): 28.66, #queue-req: 0",
    ])


def _metrics(model: m.UiModel) -> None:
    """90 s of /metrics samples as the agent streams them (SGLang's bucket bounds)."""
    from dsv4tui.sim.engine import ITL_BUCKETS, TTFT_BUCKETS

    ttft_le, itl_le = list(TTFT_BUCKETS), list(ITL_BUCKETS)
    ttft = [0.0] * len(ttft_le)
    itl = [0.0] * len(itl_le)
    requests = gen_tokens = 0.0
    for k in range(90):
        busy = k >= 20
        if busy:  # two requests a second finish: TTFT ~0.3 s, ITL ~50 ms
            requests += 2
            gen_tokens += 2 * 256
            for i, le in enumerate(ttft_le):
                ttft[i] += 2 if le >= (0.4 if k % 5 else 0.6) else 0
            for i, le in enumerate(itl_le):
                itl[i] += 512 if le >= (0.06 if k % 3 else 0.08) else 0
        hist = {
            "ttft": {"buckets": [*map(list, zip(ttft_le, ttft, strict=True)),
                                 [None, ttft[-1]]], "sum": requests * 0.33, "count": requests},
            "itl": {"buckets": [*map(list, zip(itl_le, itl, strict=True)), [None, itl[-1]]],
                    "sum": gen_tokens * 0.055, "count": gen_tokens},
        }
        model.server_metrics.add({
            "type": "server_metrics", "ok": True, "time": 1_700_000_000.0 + k, "interval": 1.0,
            "engine": "sglang", "running": 16.0 if busy else 0.0, "queued": 0.0 + (k % 4 == 0),
            "gen_throughput": 19.0 + (k % 7) * 0.9 if busy else 0.0,
            "token_usage": 0.03 + 0.001 * (k - 20) if busy else 0.0,
            "cache_hit_rate": 0.42 if busy else 0.0, "spec_accept_length": None,
            "generation_tokens_total": gen_tokens, "requests_total": requests,
            "histograms": hist}, T0 - 90 + k)


def frozen_model() -> m.UiModel:
    from dsv4tui.core.view.profiles import model_for

    cfg = demo_host_config(port=30000)
    model = model_for("demo", cfg, simulated=True)
    model.frozen = T0
    for prof in model.profiles:  # the interpreter path differs per machine
        prof.fields = [(k, "python3" if k == "python" else v) for k, v in prof.fields]
    model.conn.state = "connected"
    model.telemetry = HostTelemetry("demo", clock=lambda: T0)
    _frames(model.telemetry)
    _logs(model)
    _metrics(model)
    srv = model.server
    srv.state, srv.phase, srv.profile, srv.backend = "ready", "ready", "mxfp4", "triton"
    srv.checkpoint, srv.tp_size, srv.started_at = "MXFP4", 8, T0 - 754
    srv.model = "/models/DeepSeek-V4-Flash"
    for k in range(90):
        tok = 0.0 if k < 20 else 18.0 + (k % 7) * 0.9 + min(k - 20, 10) * 0.4
        model.decode.add(m.DecodeSample(T0 - 90 + k, tok, 16 if k >= 20 else 0, 0,
                                        0.03 if k >= 20 else 0.0))
    su = model.startup
    su.reset("mxfp4", "triton", "MXFP4", T0 - 800)
    su.status = "ready"
    durations = {"load_weights": 51.4, "kv_cache": 2.1, "cuda_graph": 24.7, "http_up": 1.8,
                 "ready": 4.6}
    t = T0 - 800 + 3.0
    for name, d in durations.items():
        ph = su.phases[name]
        ph.started, ph.ended, ph.seconds = t, t + d, d
        t += d
    su.phases["load_weights"].detail = "100%"
    su.phases["kv_cache"].detail = "1.25M tokens · 58.4 GB · torch.float8_e4m3fn"
    su.phases["cuda_graph"].detail = "12/12 batches"
    su.weights_pct = 100.0
    su.current, su.ended = "ready", t
    su.startup_s = t - (T0 - 800) + 1.2  # launch -> ready on the host: phases + "other"
    model.sanity = m.SanityView(status="passed", backend="triton", checkpoint="MXFP4",
                                at=T0 - 100, cases=[m.SanityCaseView("arith-17x23", True, "391",
                                                        r"^\s*391\s*$", 0.62)])
    sw = model.sweep
    sw.status, sw.label, sw.host = "running", "MXFP4_triton", "demo"
    sw.backend, sw.checkpoint, sw.input_len, sw.output_len = "triton", "MXFP4", 128, 256
    sw.started, sw.run_id, sw.current = T0 - 95, 4, 1
    sw.levels = [
        m.LevelRow(1, 8, completed=8, out_tok_s=11.9, ttft_p50_ms=212, ttft_p99_ms=260,
                   tpot_p50_ms=83.1, status="done", started=T0 - 93, ended=T0 - 60,
                   server={"ttft_ms": {"p50": 300.0, "p50_bucket": [200.0, 400.0]}}),
        m.LevelRow(8, 32, completed=19, errors=1, out_tok_s=19.4, ttft_p50_ms=388,
                   ttft_p99_ms=1012, tpot_p50_ms=401.7, status="running", started=T0 - 60),
        m.LevelRow(16, 48),
    ]
    runs = model.runs
    runs.rows = [
        m.RunRow(4, "MXFP4_triton", T0 - 95, "demo", "triton", "MXFP4", 19.4, "running", True),
        m.RunRow(3, "NVFP4_marlin", T0 - 3600, "demo", "marlin", "NVFP4", 28.7, "done", True),
        m.RunRow(2, "NVFP4_triton", T0 - 7200, "demo", "triton", "NVFP4", 28.5, "done", True),
        m.RunRow(1, "MXFP4_triton", T0 - 86400, "ct200", "triton", "MXFP4", 23.2, "done"),
    ]
    runs.marked = [3, 1]
    runs.baseline = 1
    from dsv4tui.core.campaign.compare import Comparison, RunInfo

    infos = [RunInfo(r.run_id, r.label, r.host, r.host, r.backend, r.checkpoint, r.status,
                     r.created, r.simulated) for r in (runs.rows[3], runs.rows[1], runs.rows[2])]
    cmp = Comparison.build(infos, {
        1: [m.LevelStats(1, 12.1, 205, 240, 82.0, 0.8, 1480.0),
            m.LevelStats(8, 19.8, 380, 990, 398.0, 0.8, 3210.0),
            m.LevelStats(16, 23.2, 602, 1830, 684.0, 0.9, 3460.0)],
        3: [m.LevelStats(1, 14.0, 190, 221, 71.0, 31.5, 1620.0),
            m.LevelStats(8, 24.9, 341, 870, 318.0, 44.0, 3390.0),
            m.LevelStats(16, 28.7, 540, 1620, 553.0, 52.3, 3550.0)],
        2: [m.LevelStats(1, 14.2, 188, 219, 70.0, 38.0, 1590.0),
            m.LevelStats(8, 24.6, 345, 880, 322.0, 49.0, 3370.0),
            m.LevelStats(16, 28.5, 548, 1650, 557.0, 58.0, 3540.0)],
    }, baseline=1)
    runs.compare = cmp
    model.campaign = _campaign()
    return model


def _campaign() -> object:
    """The story's campaign, two variants in, the third measuring C=8."""
    from dsv4tui.core.campaign.view import CampaignView, Cell, VariantView

    def cells(*vals: tuple[str, float | None, int, int]) -> list[Cell]:
        return [Cell(n, done, 0, state, tok) for state, tok, done, n in vals]

    def repeats(*best: float) -> dict[str, dict[int, float]]:  # three restarts, C=16 best
        return {f"r{i}": {2: tok} for i, tok in enumerate(best)}

    done = "done"
    return CampaignView(
        state="running", id="20261201-083015-ab12", name="story", host="demo",
        levels=[(1, 8), (8, 32), (16, 48)], started=T0 - 1265, current=2, repeats=3,
        variants=[
            VariantView("MXFP4_triton", "MXFP4_triton", done, "ready", 98.2, True,
                        cells=cells((done, 12.1, 8, 8), (done, 19.8, 32, 32),
                                    (done, 23.2, 48, 48)), run_ids=[11, 14, 17],
                        started=T0 - 1265, ended=T0 - 860, backend="triton",
                        checkpoint="MXFP4", run_tok_s=repeats(23.2, 22.6, 23.9),
                        phases={"load_weights": 41.3, "kv_cache": 6.2, "cuda_graph": 38.5,
                                "ready": 9.8},
                        kernels="capture #5 C=16: MoE GEMM 39% CC · attention 38% CC · "
                                "norm / elementwise 9% CC · communication 6% ? · other 8% ? "
                                "SIM"),
            VariantView("NVFP4_marlin", "NVFP4_marlin", done, "ready", 121.4, True,
                        cells=cells((done, 14.0, 8, 8), (done, 24.9, 32, 32),
                                    (done, 28.7, 48, 48)), run_ids=[12, 15, 18],
                        started=T0 - 860, ended=T0 - 420, backend="marlin",
                        checkpoint="NVFP4", run_tok_s=repeats(28.7, 28.1, 29.0),
                        phases={"load_weights": 52.0, "kv_cache": 6.4, "cuda_graph": 51.2,
                                "ready": 10.1}),
            VariantView("NVFP4_triton", "NVFP4_triton", "running", "ready", 101.7, True,
                        cells=cells((done, 14.2, 8, 8), ("running", None, 19, 32),
                                    ("pending", None, 0, 48)), run_ids=[13],
                        started=T0 - 420, backend="triton", checkpoint="NVFP4",
                        phases={"load_weights": 44.0, "kv_cache": 6.1, "cuda_graph": 40.9,
                                "ready": 9.6}),
            VariantView("NVFP4_trtllm_routed", "NVFP4_trtllm_routed",
                        cells=cells(("pending", None, 0, 8), ("pending", None, 0, 32),
                                    ("pending", None, 0, 48)))])


class FrozenApp(Dsv4App):
    """No host, nothing moving: cursor blink off, frozen clock."""

    def __init__(self, *args: object, initial: str | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.initial = initial

    def on_mount(self) -> None:  # runs before Dsv4App.on_mount (Textual calls both)
        self.call_after_refresh(self._initial)

    def _initial(self) -> None:
        from dsv4tui.tui.screens.help import HelpScreen

        if self.initial == "compare" and self.model.runs.compare is not None:
            self.runs.show_compare(self.model.runs.compare)
        elif self.initial == "help":
            self.push_screen(HelpScreen())
        self.call_after_refresh(self._no_blink)

    def _no_blink(self) -> None:
        from textual.widgets import Input

        for screen in self.screen_stack:
            for box in screen.query(Input):
                box.cursor_blink = False


def frozen_app(mode: str = "dashboard", theme: str = "dark") -> FrozenApp:
    start = "runs" if mode == "compare" else mode
    if mode == "help":
        start = "dashboard"
    app = FrozenApp(settings=Settings(theme=theme), model=frozen_model(), start_mode=start,
                    initial=mode)
    return app


def store_kernel_captures(batch_b: int = 16) -> list[int]:
    """Two kernel captures in the run store (the data dir's), stored as ``dsv4tui kernels``
    stores them: the simulator's traces of MXFP4/triton at C=16 and NVFP4/marlin at C=
    ``batch_b``, parsed by the agent's trace parser. Fixed seeds and times: the same every
    run. Returns the capture ids (A, B)."""
    import tempfile

    from dsv4tui.agent.kernels import trace_parse
    from dsv4tui.core.campaign.kernels import ServerContext, store_capture
    from dsv4tui.core.store import RunStore
    from dsv4tui.sim.trace import write_trace

    ids = []
    with tempfile.TemporaryDirectory() as tmp, RunStore() as store:
        for i, (backend, ckpt, tensor, batch) in enumerate(
                (("triton", "MXFP4", 0.8, 16), ("marlin", "NVFP4", 38.0, batch_b))):
            out = Path(tmp) / backend
            write_trace(str(out), backend, ckpt, 5, tp_size=2, batch=batch, seed=1,
                        start_time=T0 - 900 + 300 * i)
            s = trace_parse.parse_traces([str(out)])
            trace_parse.attribute_tensor_cores(s, tensor, "simulated", 97.0)
            s.update(model="deepseek-v4-flash", time=T0 - 600 + 300 * i,
                     load={"concurrency": batch},
                     server={"backend": backend, "checkpoint": ckpt, "simulated": True})
            ctx = ServerContext(host="demo", backend=backend, checkpoint=ckpt, simulated=True)
            ids.append(store_capture(store, s, ctx)[0])
    return ids


def frozen_pair_app(theme: str = "dark") -> FrozenApp:
    """The dashboard of a host made of two nodes (16 GPUs, two nodes' logs), frozen."""
    from dsv4tui.core.hosts.demo import demo_pair_config
    from dsv4tui.core.nodes.streams import node_column
    from dsv4tui.core.nodes.telemetry import NodeFrames

    model = frozen_model()
    model.conn.host = "demo-pair"
    cfg = demo_pair_config(port=30000)
    model.telemetry = HostTelemetry("demo-pair", clock=lambda: T0)
    one = HostTelemetry("node", clock=lambda: T0)
    _frames(one)  # 40 frames of one node; both nodes carry them
    frames = NodeFrames(list(cfg.nodes or []), clock=lambda: T0)
    assert one.latest is not None
    for node in frames.nodes:
        frames.feed(model.telemetry, node, one.latest)
    logs = [model.logs.get(i) for i in range(model.logs.first, model.logs.next)]
    model.logs.clear()
    model.logs.nodes[:] = list(frames.nodes)
    for i, line in enumerate(x for x in logs if x is not None):
        model.logs.append(node_column(frames.nodes[i % 2], 10, line.text))
    srv = model.server
    srv.tp_size = 16
    srv.nodes = [{"node": n, "rank": r, "state": "ready", "pid": 4000 + r}
                 for r, n in enumerate(frames.nodes)]
    return FrozenApp(settings=Settings(theme=theme), model=model, start_mode="dashboard",
                     initial="dashboard")


if __name__ == "__main__":
    if sys.argv[1:2] == ["kernels"]:  # two captures in the data dir's store (once)
        store_kernel_captures(int(sys.argv[3]) if len(sys.argv) > 3 else 16)
    app = frozen_app(*(sys.argv[1:3]))
    app.run()
