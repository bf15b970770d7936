"""The dashboard's compare view says, for each variant against the baseline at each level, the
change in output tok/s with its 95 % interval across repeats and the verdict -- the lines
``runs compare`` prints, from the same core function; one run each says there is no interval."""

from __future__ import annotations

from snapshot_apps.frozen import frozen_app
from textual.widgets import Static

from dsv4tui.core.campaign.compare import Comparison, RunInfo, load_text
from dsv4tui.core.campaign.verdict import verdict_lines
from dsv4tui.core.view import model as m
from dsv4tui.tui.screens.runs import CompareScreen

TOK = {"NVFP4_marlin": (28.7, 28.1, 29.0), "NVFP4_triton": (35.2, 34.6, 36.1)}


def repeated() -> Comparison:
    """Three repeats of each variant (runs sharing a label), triton clearly faster at C=16."""
    infos, points, rid = [], {}, 0
    for label, toks in TOK.items():
        for tok in toks:
            rid += 1
            infos.append(RunInfo(rid, label, "demo", "demo", label.split("_")[1], "NVFP4"))
            points[rid] = [m.LevelStats(16, tok, 540, 1620, 553.0, 52.3, 3550.0)]
    return Comparison.build(infos, points, baseline=1)


def notes_text(app: object) -> str:
    return str(app.screen.query_one("#cmp-notes", Static).render())  # type: ignore[attr-defined]


async def test_repeats_give_each_variant_its_interval_and_verdict() -> None:
    app = frozen_app("runs")
    cmp = repeated()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.model.runs.compare = cmp
        app.runs.show_compare(cmp)
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        text = notes_text(app)
    row = cmp.verdicts()[0]
    assert row.label == "NVFP4_triton" and row.headline.verdict == "faster"
    assert "verdicts against NVFP4_marlin (95 % interval across restarts" in text
    h = row.headline
    assert (f"NVFP4_triton C=16: tok/s {h.change_pct:+.1f} % [{h.ci_low:+.1f}, "
            f"{h.ci_high:+.1f}] faster (n=3/3)") in text
    for line in verdict_lines(cmp.verdicts(), load_text):  # the CLI's lines, word for word
        assert line.strip() in text


async def test_one_run_each_says_there_is_no_interval() -> None:
    app = frozen_app("compare")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        text = notes_text(app)
    assert "NVFP4_marlin C=16: tok/s +23.7 % (one run each: no interval" in text


async def test_the_canary_verdicts_are_there_too() -> None:
    """Each variant's accuracy canary against the baseline's (``runs compare``'s lines), a
    failed gate said: a 10 % wrong backend reads as worse, its sweep skipped."""
    from dataclasses import replace

    from dsv4tui.core.campaign.verdict import canary_lines

    cmp = repeated()
    canary = {1: {"correct": 98, "total": 100},
              4: {"correct": 88, "total": 100,
                  "gate": {"passed": False, "drop_points": 10.0, "margin": 3.0,
                           "action": "skip"}}}
    cmp = Comparison.build([replace(r, canary=canary.get(r.id)) for r in cmp.runs],
                           {rid: list(p.values()) for rid, p in cmp.points.items()}, 1)
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.model.runs.compare = cmp
        app.runs.show_compare(cmp)
        await pilot.pause()
        text = notes_text(app)
    lines = canary_lines(cmp.canary_verdicts())
    assert lines and lines[0].startswith("accuracy canary")
    for line in lines:  # word for word
        assert line.strip() in text
    assert "NVFP4_triton: 88/100 correct" in text and "worse; gate FAILED (drop 10.0 > " \
        "margin 3.0 points, sweep skipped)" in text
