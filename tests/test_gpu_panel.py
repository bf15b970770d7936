"""GpuPanel and GpuStrip: snapshots at 120x40 and 80x24 with frozen frames, plus behaviour.

The frames are fixtures: ``fake_nvml_h200x8.jsonl`` came from the agent's NVML code path over
a fake libnvidia-ml (no GPU here), the nvidia-smi frames from the CSV fixtures. The clock is
frozen so stale ages are stable.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from dsv4tui.agent.host.smi_source import FIELD_SETS, parse_query_line
from dsv4tui.core.telemetry import Frame, GpuSample, HostTelemetry
from dsv4tui.tui.widgets.cells import bar_cells, level_char, spark_chars
from dsv4tui.tui.widgets.gpu_panel import COLUMNS, GpuFrame, GpuPanel, cell_value, plan_layout
from dsv4tui.tui.widgets.gpu_strip import GpuStrip

sys.path.insert(0, str(Path(__file__).parent / "data" / "telemetry"))
import loaders

BASE = 1000.0


class FrozenClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def nvml_telemetry(age_after_last: float = 0.4, drop_gpu7: int = 0,
                   lose_gpu3: bool = False) -> HostTelemetry:
    events = loaders.frames("fake_nvml_h200x8.jsonl")
    clock = FrozenClock(BASE + len(events) - 1 + age_after_last)
    t = HostTelemetry("ct200", clock=clock)
    for i, ev in enumerate(events):
        if drop_gpu7 and i >= len(events) - drop_gpu7:
            ev = dict(ev, gpus=[g for g in ev["gpus"] if g["index"] != 7])
        if lose_gpu3 and i == len(events) - 1:
            ev = dict(ev, gpus=[g if g["index"] != 3 else
                                {"index": 3, "name": g["name"], "uuid": g["uuid"],
                                 "error": "GPU is lost"} for g in ev["gpus"]])
        t.add(Frame.from_event(ev), received=BASE + i)
    return t


def smi_telemetry(age_after_last: float) -> HostTelemetry:
    lines = loaders.text("smi_h200x8_loop.csv").splitlines()
    clock = FrozenClock(BASE + 1 + age_after_last)
    t = HostTelemetry("ct200", clock=clock)
    for k, tick in enumerate((lines[:8], lines[8:])):
        gpus = [parse_query_line(line, FIELD_SETS[1]) for line in tick]
        for g in gpus:
            assert g is not None
            g.pop("driver")
        t.add(Frame.from_event({"type": "frame", "seq": k, "time": 1764460000.0 + k,
                                "interval": 1.0, "source": "nvidia-smi", "driver": "580.159",
                                "note": "nvml: pynvml not importable", "gpus": gpus}),
              received=BASE + k)
    return t


def sim_telemetry() -> HostTelemetry:
    gpus = [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpm": True,
             "util_gpu": 98 if i < 4 else 0, "tensor_active": 0.8 if i < 4 else 0.0,
             "sm_active": 92 if i < 4 else 0, "dram_active": 35 if i < 4 else 0,
             "mem_used_mib": 86140 if i < 4 else 0, "mem_total_mib": 97887,
             "power_w": 455.0 if i < 4 else 32.0, "power_limit_w": 600.0,
             "temp_c": 66 if i < 4 else 31, "sm_clock_mhz": 2430 if i < 4 else 345,
             "sm_clock_max_mhz": 2430} for i in range(8)]
    t = HostTelemetry("demo", clock=FrozenClock(BASE + 0.2))
    for k in range(30):
        t.add(Frame.from_event({"type": "frame", "seq": k, "time": 1764460000.0 + k,
                                "interval": 1.0, "source": "simulated", "driver": "simulated",
                                "gpus": gpus}), received=BASE - 29 + k)
    return t


class PanelApp(App[None]):
    """A dedicated snapshot app: the panel and the strip over frozen telemetry."""

    TITLE = "gpu panel"
    CSS = """
    GpuPanel { border: round $primary; }
    GpuStrip { dock: bottom; }
    """

    def __init__(self, telemetry: HostTelemetry) -> None:
        super().__init__()
        self.telemetry = telemetry

    def compose(self) -> ComposeResult:
        yield GpuPanel(telemetry=self.telemetry)
        yield GpuStrip(telemetry=self.telemetry)


# -- snapshots --------------------------------------------------------------------------------

def test_snapshot_120x40_eight_gpus(snap_compare: Any) -> None:
    assert snap_compare(PanelApp(nvml_telemetry()), terminal_size=(120, 40))


def test_snapshot_120x40_stale_and_lost_gpu(snap_compare: Any) -> None:
    app = PanelApp(nvml_telemetry(drop_gpu7=12, lose_gpu3=True))
    assert snap_compare(app, terminal_size=(120, 40))


def test_snapshot_80x24_eight_gpus(snap_compare: Any) -> None:
    assert snap_compare(PanelApp(nvml_telemetry()), terminal_size=(80, 24))


def test_snapshot_80x24_nvidia_smi_host_stale(snap_compare: Any) -> None:
    assert snap_compare(PanelApp(smi_telemetry(age_after_last=12.0)), terminal_size=(80, 24))


def test_snapshot_80x24_simulated(snap_compare: Any) -> None:
    assert snap_compare(PanelApp(sim_telemetry()), terminal_size=(80, 24))


# -- rendering rules ---------------------------------------------------------------------------

async def _panel_text(telemetry: HostTelemetry, size: tuple[int, int]) -> list[str]:
    app = PanelApp(telemetry)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        return [line.plain for line in panel.lines(panel.size.width)]


async def test_eight_gpus_fit_120x40_and_80x24() -> None:
    for size in ((120, 40), (80, 24)):
        lines = await _panel_text(nvml_telemetry(), size)
        assert len(lines) == 2 + 8  # header, titles, one row per GPU
        width = size[0] - 4  # border + padding
        assert all(len(line) <= width for line in lines)
        rows = lines[2:]
        assert [r.split()[0] for r in rows] == [str(i) for i in range(8)]
        assert all("%" in r for r in rows)
        assert "TENSOR" in lines[1]


async def test_null_reads_na_never_zero() -> None:
    lines = await _panel_text(smi_telemetry(age_after_last=0.2), (120, 40))
    rows = lines[2:]
    for row in rows:
        # nvidia-smi has no tensor / SM / DRAM activity: n/a in those columns and the history
        assert row.count("n/a") >= 4, row
        assert " 0%" not in row and "0.0%" not in row
    assert "nvidia-smi" in lines[0] and "pynvml not importable" in lines[0]


async def test_stale_gpu_is_marked_with_its_age() -> None:
    lines = await _panel_text(nvml_telemetry(drop_gpu7=12, lose_gpu3=True), (120, 40))
    assert "stale 12s" in lines[2 + 7]
    assert "GPU is lost" in lines[2 + 3]
    host_stale = await _panel_text(nvml_telemetry(age_after_last=15.0), (80, 24))
    assert "no frames for 15s" in host_stale[0]
    assert all("stale 15s" in row for row in host_stale[2:])


async def test_update_frame_error_and_waiting() -> None:
    app = PanelApp(HostTelemetry("ct200", clock=FrozenClock(BASE)))
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(GpuPanel)
        assert "waiting for telemetry" in panel.lines(116)[-1]
        # the height is counted without building the rows: it must match them in every state
        assert panel.line_count() == len(panel.lines(116)) == 2
        panel.show_error("no NVIDIA driver on ct200")
        await pilot.pause()
        assert panel.lines(116)[1].plain == "no NVIDIA driver on ct200"
        assert panel.line_count() == len(panel.lines(116)) == 2
        frame = Frame.from_event(loaders.frames("fake_nvml_h200x8.jsonl")[-1])
        panel.telemetry.clock = FrozenClock(BASE)  # type: ignore[method-assign]
        panel.update_frame(frame)
        await pilot.pause()
        lines = [line.plain for line in panel.lines(116)]
        assert len(lines) == 10 and "no NVIDIA driver" not in "".join(lines)
        assert panel.line_count() == 10
        assert panel.size.height == 10  # height: auto follows the rows
        panel.show_error("telemetry stream lost")  # error row above the (kept) GPU rows
        await pilot.pause()
        assert panel.line_count() == len(panel.lines(116)) == 11


async def test_warning_style_on_busy_gpu_with_idle_tensor_pipe() -> None:
    app = PanelApp(nvml_telemetry())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        warn = panel.get_component_rich_style("gpu-panel--warn").color
        assert warn is not None

        def in_warning_colour(y: int) -> list[str]:  # the drawn line, as the terminal gets it
            return [seg.text for seg in panel.render_line(y)
                    if seg.style is not None and seg.style.color == warn]

        assert "0.8%" in panel.render_line(2).text  # GPU 0: util 99 %, tensor 0.8 %
        assert any("0.8%" in text for text in in_warning_colour(2))  # -> CUDA cores
        assert "93" in panel.render_line(6).text  # GPU 4: bf16 matmul, tensor 93 %
        assert not any("93" in text for text in in_warning_colour(6))  # no warning


def test_theme_colours_come_from_css_variables() -> None:
    css = GpuPanel.DEFAULT_CSS + GpuStrip.DEFAULT_CSS
    assert "$primary" in css and "$warning" in css and "$error" in css
    assert "#" not in css and "rgb" not in css  # no hard-coded colours


def test_gpu_frame_message_coalesces_per_host() -> None:
    f = Frame.from_event(loaders.frames("fake_nvml_h200x8.jsonl")[0])
    a, b, c = GpuFrame("ct200", f), GpuFrame("ct200", f), GpuFrame("other", f)
    assert b.can_replace(a) and not c.can_replace(a)


# -- helpers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("width", range(20, 201, 6))
def test_layout_always_fits(width: int) -> None:
    layout = plan_layout(width)
    assert layout.width <= width
    keys = [c.key for c in layout.columns]
    assert keys[:2] == ["util", "tensor"]  # the headline columns survive any width
    if width >= 116:
        assert keys == [c.key for c in COLUMNS] and all(layout.bars.values())
        assert layout.spark_w >= 20


def test_bars_and_sparklines() -> None:
    assert bar_cells(None, 4) == ("", "    ")
    assert bar_cells(0.0, 4) == ("", "    ")
    assert bar_cells(0.001, 4) == ("▏", "   ")  # non-zero never looks like zero
    assert bar_cells(1.0, 4) == ("████", "")
    assert bar_cells(0.5, 3) == ("█▌", " ")
    assert spark_chars([None, 0, 50, 100], 6) == "   ▁▅█"
    assert spark_chars([1, 2, 3], 2) == "▁▁"
    assert level_char(None) == "·" and level_char(1.0) == "█"


def test_cell_values() -> None:
    g = GpuSample(index=0, util_gpu=99, tensor_active=0.8, mem_used_mib=130112,
                  mem_total_mib=143771, power_w=699.0, power_limit_w=700.0, temp_c=88,
                  sm_clock_mhz=1500, sm_clock_max_mhz=1980, clock_event_reasons=("hw_thermal",))
    assert cell_value("tensor", g, 5) == (0.008, " 0.8%", True)
    assert cell_value("mem", g, 7)[1:] == ("127/140", False)
    assert cell_value("power", g, 7)[1:] == ("699/700", True)
    assert cell_value("temp", g, 4)[1:] == ("88°C", True)
    assert cell_value("clock", g, 4)[1:] == ("1500", True)
    empty = GpuSample(index=1)
    for key in ("util", "tensor", "sm", "dram", "mem", "power", "temp", "clock"):
        frac, text, warn = cell_value(key, empty, 7)
        assert frac is None and text.strip() == "n/a" and warn is False


async def test_strip_summarises_the_host_and_shows_errors() -> None:
    t = nvml_telemetry()
    app = PanelApp(t)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        strip = app.query_one(GpuStrip)
        text = strip.render().plain
        assert text.startswith("ct200 util ") and "tensor" in text and "power" in text
        t.set_error("no NVIDIA driver on ct200")  # what the app does on a stream failure
        strip.refresh_telemetry()
        assert strip.render().plain == "ct200 no NVIDIA driver on ct200"
        strip.update_frame(Frame.from_event(loaders.frames("fake_nvml_h200x8.jsonl")[-1]))
        assert "no NVIDIA driver" not in strip.render().plain
    smi = PanelApp(smi_telemetry(age_after_last=0.3))
    async with smi.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = smi.query_one(GpuStrip).render().plain
        assert "tensor ········ n/a" in text and "SM n/a" in text
