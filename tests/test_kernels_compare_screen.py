"""The Kernels screen compares two captures in the dashboard (issue 27), and its list is not
cut (issue 25): the real App, captures stored in a real SQLite store by the real ingest
(the simulator's traces parsed by the agent's trace parser, ``store_capture``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from snapshot_apps.frozen import T0, FrozenApp, frozen_model, store_kernel_captures
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import ContentSwitcher, DataTable, Static

from dsv4tui.core.campaign.kernel_compare import compare
from dsv4tui.core.config import Settings
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import kernels as kernel_store
from dsv4tui.tui.screens.base import KeyBar
from dsv4tui.tui.screens.kernels import KernelsBody, list_columns
from dsv4tui.tui.widgets.kernel_compare import compare_markup, fit_groups


def kernels_app(keymap: dict[str, str] | None = None) -> FrozenApp:
    return FrozenApp(settings=Settings(keymap=keymap or {}), model=frozen_model(),
                     start_mode="kernels", initial="kernels")


async def until(pilot: Pilot[Any], ok: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        await pilot.pause(0.02)
        if ok():
            return
    raise AssertionError(f"never: {what}")


def text_of(app: FrozenApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def mark_both(pilot: Pilot[Any], body: KernelsBody) -> None:
    await until(pilot, lambda: len(body.items) == 2, "the two stored captures listed")
    # newest first: #2 NVFP4/marlin on top; mark #1 MXFP4/triton first: it is A, the base
    await pilot.press("down", "space", "up", "space")
    assert body.marked == [1, 2]


async def test_mark_two_and_compare_where_the_time_moved() -> None:
    a, b = store_kernel_captures()
    app = kernels_app()
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await until(pilot, lambda: len(body.items) == 2, "captures listed")
        keys = str(app.screen.query_one(KeyBar).render())
        assert "c Compare" in keys and "space Mark" in keys  # on the key bar
        await pilot.press("space", "c")  # one marked: it says what to do
        assert body.comparing is False
        assert "mark two captures" in text_of(app, "#kern-status")
        await pilot.press("space")
        await mark_both(pilot, body)
        await pilot.press("c")
        await pilot.pause()
        switcher = app.screen.query_one("#kern-view", ContentSwitcher)
        assert switcher.current == "kern-compare-box"
        box = app.screen.query_one("#kern-compare-box")
        assert f"A #{a} triton/MXFP4 → B #{b} marlin/NVFP4" in str(box.border_title)
        assert "SIMULATED" in str(box.border_title)
        text = text_of(app, "#kern-compare")
        lines = text.splitlines()
        assert lines[0].startswith(f"A  #{a} triton/MXFP4 SIMULATED · load C=16 · batch 16")
        assert lines[1].startswith(f"B  #{b} marlin/NVFP4 SIMULATED · load C=16 · batch 16")
        assert "share of a decode step" in text and "GPU ms per decode step" in text
        assert "ms per token" not in text  # the same batch: per step says it all
        moe = next(line for line in lines if line.startswith("MoE GEMM"))
        assert moe.split()[2:5] == ["38.9", "%", "26.9"]  # A share, B share
        assert "CC  TC  ▲ moved to tensor cores" in moe
        families = {line.split("  ")[0] for line in lines}
        assert {"attention", "communication", "norm / elementwise"} <= families
        comm = next(line for line in lines if line.startswith("communication"))
        assert comm.endswith("CC  CC  CUDA cores in both")
        assert "+ appeared in B: marlin_moe_wna16::Marlin (moe_gemm)" in text
        assert "- vanished from A: _mxfp4_slot_gemv_kernel (moe_gemm)" in text
        assert "~ moved: _tiled_sparse_decode_kernel (attention)" in text
        # what it shows is the core's model, drawn (one definition)
        with RunStore() as store:
            model = compare(kernel_store.get_capture(store, a), kernel_store.get_capture(store, b))
        assert body.comparison == model
        moe_row = next(f for f in model["families"] if f["family"] == "moe_gemm")
        assert f"{moe_row['step_ms_change']:+.1f}" in moe
        # escape: back to the captures' detail, the marks kept
        await pilot.press("escape")
        assert switcher.current == "kern-detail" and body.marked == [1, 2]
        await pilot.press("c", "c")  # c again also goes back
        assert switcher.current == "kern-detail"


async def test_different_batches_compared_per_step_and_per_token() -> None:
    store_kernel_captures(batch_b=32)
    app = kernels_app()
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await mark_both(pilot, body)
        table = app.screen.query_one("#kern-table", DataTable)
        bs = [str(table.get_cell_at((r, table.get_column_index("bs")))) for r in range(2)]
        assert bs == ["32", "16"]  # each capture's batch and load in the list
        await pilot.press("c")
        await pilot.pause()
        text = text_of(app, "#kern-compare")
        assert "load C=32 · batch 32" in text
        assert ("different batches (bs 16 vs 32): compared per decode step AND per token "
                "(ms per step / batch)") in text
        assert "GPU ms per decode step" in text and "GPU ms per token" in text
        assert body.comparison is not None
        moe = next(f for f in body.comparison["families"] if f["family"] == "moe_gemm")
        row = next(line for line in text.splitlines() if line.startswith("MoE GEMM"))
        assert f"{moe['a']['token_ms']:.3f}" in row and f"{moe['b']['token_ms']:.3f}" in row
        assert moe["b"]["token_ms"] == pytest.approx(moe["b"]["step_ms"] / 32)


async def test_remapped_compare_key_compares_captures() -> None:
    store_kernel_captures()
    app = kernels_app({"compare": "C"})
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await mark_both(pilot, body)
        await pilot.press("c")
        assert not body.comparing  # c is no longer the compare key
        await pilot.press("C")
        await pilot.pause()
        assert body.comparing
        assert "C Compare" in str(app.screen.query_one(KeyBar).render())


async def test_the_palettes_compare_on_the_kernels_screen_compares_the_captures() -> None:
    """The command palette runs the App's compare action: on Kernels it compares the two
    marked captures (it used to jump to the Runs screen)."""
    store_kernel_captures()
    app = kernels_app()
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await mark_both(pilot, body)
        app.action_compare()
        await until(pilot, lambda: body.comparing, "the comparison")
        assert app.view == "kernels"


async def test_a_capture_without_a_parsed_trace_says_why() -> None:
    store_kernel_captures()
    with RunStore() as store:
        kernel_store.save_capture(store, {"basis": "decode", "time": T0}, host="demo")
    app = kernels_app()
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await until(pilot, lambda: len(body.items) == 3, "three captures")
        await pilot.press("space", "down", "space", "c")  # the one without a trace, and #2
        await pilot.pause()
        assert body.comparing
        assert "kernel capture #3 has no parsed trace" in text_of(app, "#kern-compare")


@pytest.mark.parametrize("size", [(160, 48), (120, 40), (80, 24)])
async def test_the_capture_list_is_not_cut(size: tuple[int, int]) -> None:
    store_kernel_captures()
    app = kernels_app()
    async with app.run_test(size=size) as pilot:
        body = app.body
        assert isinstance(body, KernelsBody)
        await until(pilot, lambda: len(body.items) == 2, "captures listed")
        await pilot.pause()
        table = app.screen.query_one("#kern-table", DataTable)
        keys = [c.key.value for c in table.columns.values()]
        used = sum(c.get_render_width(table) for c in table.columns.values())
        assert used <= table.scrollable_content_region.width  # every column whole
        if size[0] >= 120:  # every column, the status ones (step ms, tensor %) included
            assert keys == ["mark", "id", "backend", "ckpt", "conc", "bs", "step", "tensor",
                            "run", "date"]
        assert {"id", "backend", "step"} <= set(keys)
        for r in range(table.row_count):  # no cell longer than its column
            for key, column in table.columns.items():
                cell = table.get_cell(table.coordinate_to_cell_key((r, 0)).row_key, key)
                assert len(str(cell)) <= column.width


def test_list_columns_drop_the_low_priority_ones_first() -> None:
    natural = {"id": 3, "backend": 18, "ckpt": 5, "conc": 2, "bs": 6, "run": 3}

    def keys(width: int) -> list[str]:
        cols = list_columns(width, natural)
        assert sum(w + 2 for _, _, w in cols) <= width or width < 40
        return [k for _, k, _ in cols]

    assert keys(156) == ["mark", "id", "backend", "ckpt", "conc", "bs", "step", "tensor",
                         "run", "date"]
    assert dict((k, w) for _, k, w in list_columns(86, natural))["date"] == 11  # 12-02 16:53
    assert keys(80) == ["mark", "id", "backend", "ckpt", "conc", "bs", "step", "tensor", "run"]
    assert keys(64) == ["mark", "id", "backend", "ckpt", "bs", "step", "tensor"]
    assert keys(50) == ["mark", "id", "backend", "bs", "step"]
    narrow = list_columns(36, natural)  # the backend is cut to what is left
    assert [k for _, k, _ in narrow] == ["mark", "id", "backend", "bs", "step"]
    assert sum(w + 2 for _, _, w in narrow) <= 36


def test_the_family_table_fits_its_width() -> None:
    store_kernel_captures(batch_b=32)
    with RunStore() as store:
        a, b = kernel_store.captures(store)[::-1]
    model = compare(a, b)
    for width in (60, 76, 100, 156, 200):
        groups, dropped = fit_groups(model, width)
        text = Content.from_markup(compare_markup(model, width)).plain
        table = [line for line in text.splitlines() if line.startswith("MoE GEMM")]
        assert table and all(len(line) <= width for line in table), width
        assert groups[0].key == "family" and groups[-1].key == "cores"
        if width >= 156:
            assert not dropped
        if width <= 76:
            assert "ms per step" in dropped  # per token is the fair figure: kept longest
