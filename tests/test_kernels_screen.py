"""The Kernels screen: fed by the app (set_captures), asks through messages, compares two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.widgets import DataTable, Static

from dsv4tui.agent.kernels import trace_parse
from dsv4tui.core.view.model import UiModel
from dsv4tui.sim.trace import write_trace
from dsv4tui.tui.screens.base import Body
from dsv4tui.tui.screens.kernels import KernelsBody
from dsv4tui.tui.screens.main import MainScreen
from dsv4tui.tui.widgets.kernel_families import FamilyBars, bar, family_rows
from dsv4tui.tui.widgets.kernel_table import KernelTable


def summary(tmp: Path, backend: str, checkpoint: str, tensor: float) -> dict[str, Any]:
    write_trace(str(tmp), backend, checkpoint, 4, tp_size=1, step_s=0.4, seed=5)
    s = trace_parse.parse_traces([str(tmp)])
    trace_parse.attribute_tensor_cores(s, tensor, "simulated", 97.0)
    s["model"] = "deepseek-v4-flash"
    return s


class Harness(App[None]):
    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__()
        self.items = items
        self.asked: list[Any] = []

    def on_mount(self) -> None:
        self.body = KernelsBody()
        self.push_screen(MainScreen(UiModel(), [self.body], "kernels"))

    def on_kernels_body_reload(self, message: KernelsBody.Reload) -> None:
        self.asked.append("reload")
        assert message.screen is self.body
        self.body.set_captures(self.items)

    def on_kernels_body_run_requested(self, message: KernelsBody.RunRequested) -> None:
        self.asked.append(("run", message.steps, message.concurrency))


async def test_kernels_body_shows_and_compares(tmp_path: Path) -> None:
    a = summary(tmp_path / "a", "triton", "MXFP4", 0.8)
    b = summary(tmp_path / "b", "marlin", "NVFP4", 38.0)
    items = [{"id": 2, "summary": b, "backend": "marlin", "checkpoint": "NVFP4",
              "created_at": 1.7e9, "simulated": True},
             {"id": 1, "summary": a, "backend": "triton", "checkpoint": "MXFP4", "run_id": 4,
              "created_at": 1.7e9, "simulated": True}]
    app = Harness(items)
    async with app.run_test(size=(150, 48)) as pilot:
        await pilot.pause()
        screen = app.body
        assert isinstance(screen, KernelsBody)
        assert app.asked == ["reload"]
        assert screen.query_one("#kern-table", DataTable).row_count == 2
        assert [i.id for i in screen.shown()] == [2]  # the highlighted (newest) one
        head = str(screen.query_one("#kern-head", Static).render())
        assert "#2 marlin/NVFP4" in head and "SIMULATED" in head
        kernels = screen.query_one("#kern-kernels", KernelTable)
        assert kernels.row_count > 5 and len(kernels.columns) == 8  # + blocks, SMs, occ
        cells = [str(c) for c in kernels.get_row_at(0)]
        assert cells[-1] == "_tiled_sparse_decode_kernel" and cells[-2].split() == \
            ["64", "34%", "3%"]
        found = str(screen.query_one("#kern-findings", Static).render())
        assert "188 SMs from the trace" in found
        assert ("`_tiled_sparse_decode_kernel`: 64 blocks on 188 SMs (34 % of the GPU) for 43 % "
                "of each decode step") in found
        # mark the MXFP4 capture first (the base), then the NVFP4 one: side by side
        await pilot.press("down", "space", "up", "space")
        assert screen.marked == [1, 2]
        assert [i.id for i in screen.shown()] == [1, 2]
        assert len(kernels.columns) == 9  # the second capture's share beside
        found = str(screen.query_one("#kern-findings", Static).render())
        assert "#1 triton/MXFP4 (run 4)" in found and "#2 marlin/NVFP4" in found
        assert "`_mxfp4_slot_gemv_kernel`: 48 blocks on 188 SMs (26 % of the GPU), on CUDA cores" \
            in found
        text = screen.query_one("#kern-families", FamilyBars).render_text(120).plain
        assert "#1 triton/MXFP4 (run 4)" in text and "#2 marlin/NVFP4" in text
        moe = next(line for line in text.splitlines() if line.startswith("MoE GEMM"))
        assert "CC" in moe  # MXFP4/triton: the slot GEMV on CUDA cores
        await pilot.press("k")
        await pilot.pause()
        assert app.asked[-1] == ("run", 5, 16)
        assert "capture requested" in str(screen.query_one("#kern-status", Static).render())
        screen.set_error("no trace file appeared")
        assert "capture failed" in str(screen.query_one("#kern-status", Static).render())
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.asked[-1] == "reload"


async def test_kernels_body_empty() -> None:
    app = Harness([])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        head = str(app.screen.query_one("#kern-head", Static).render())
        assert "no kernel captures yet" in head


class Other(Body):
    MODE = "other"


class Modes(App[None]):
    """Like the dashboard: the Kernels body is one body among others."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict[str, Any]] = []
        self.main = MainScreen(UiModel(), [Other(UiModel()), KernelsBody()], "other")

    def on_mount(self) -> None:
        self.push_screen(self.main)

    async def switch_mode(self, mode: str) -> None:
        self.main.show(mode)

    def on_kernels_body_reload(self, message: KernelsBody.Reload) -> None:
        assert message.screen is not None
        message.screen.set_captures(self.items)


async def test_a_capture_stored_meanwhile_shows_when_the_screen_comes_back(
        tmp_path: Path) -> None:
    app = Modes()
    async with app.run_test(size=(150, 48)) as pilot:
        await app.switch_mode("kernels")
        await pilot.pause()
        table = app.screen.query_one("#kern-table", DataTable)
        assert table.row_count == 0
        await app.switch_mode("other")
        app.items = [{"id": 3, "summary": summary(tmp_path, "triton", "MXFP4", 0.8),
                      "backend": "triton", "checkpoint": "MXFP4", "created_at": 1.7e9}]
        await app.switch_mode("kernels")
        await pilot.pause()
        assert table.row_count == 1


def test_bars_and_rows() -> None:
    assert bar(1.0, 4) == "████" and bar(0.0, 4) == "    " and bar(0.5, 4) == "██  "
    assert bar(0.125 / 4 * 4, 1) == "▏"
    rows = family_rows([{"families": [{"family": "moe_gemm", "label": "MoE GEMM"}]},
                        {"families": [{"family": "attention", "label": "attention"}]}])
    assert [label for label, _ in rows] == ["MoE GEMM", "attention"]
    assert rows[0][1][1] is None and rows[1][1][0] is None
