"""``dsv4tui runs report``: the report of stored runs (a real SQLite store), read back as a
person's browser would get it: the HTML parsed, every number of the compare table checked
against ``compare_runs``, every chart parsed as SVG with one series per run; Markdown with
its SVGs beside it; a run with no finished level; matplotlib missing."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core.campaign import charts, report
from dsv4tui.core.campaign.columns import COMPARE_COLUMNS, fmt_change
from dsv4tui.core.campaign.compare import compare_runs
from dsv4tui.core.campaign.export import md_cell
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.main import main

ARGV = ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--model-path",
        "/models/DeepSeek-V4-Flash-NVFP4", "--tp-size", "8", "--moe-runner-backend", "{b}",
        "--trust-remote-code"]


def _req(level: int, index: int, c: int, gap: float) -> dict[str, Any]:
    return {"level": level, "concurrency": c, "index": index, "ok": True,
            "start_s": index * 0.5, "ttft_s": 0.05 + 0.01 * c + 0.001 * index,
            "ttfat_s": 0.05, "e2e_s": 0.1 + gap * 9 / 1000, "tpot_s": gap / 1000,
            "output_tokens": 10, "prompt_tokens": 5, "token_source": "usage", "chunks": 10,
            "chunk_gaps_ms": [gap] * 9, "status": 200}


def seed_run(store: RunStore, label: str, backend: str, gap: float, *,
             levels: tuple[int, ...] = (1, 8, 16), power: float = 400.0,
             tensor: float = 2.0) -> int:
    run_id = store.start_run(label=label, host="ct200", backend=backend, checkpoint="NVFP4",
                             model="deepseek-v4-flash", gpu_names=["NVIDIA H200"] * 8,
                             server_version="0.5.2", plan={"input_len": 5, "output_len": 10})
    for li, c in enumerate(levels):
        reqs = [_req(li, i, c, gap) for i in range(4)]
        for r in reqs:
            store.add_request(run_id, r)
        store.add_level(run_id, {**stats.level_metrics(reqs, c, 4), "level": li,
                                 "started_at": 10.0, "finished_at": 20.0})
        store.set_level_gpus(run_id, li, [
            {"gpu": g, "frames": 5, "util_mean": 90.0, "tensor_mean": tensor + c / 10,
             "power_mean_w": power} for g in range(8)])
    argv = [a.format(b=backend) for a in ARGV]
    cstore.set_run_meta(store, run_id, argv_json=json.dumps(argv), quantization="modelopt_fp4",
                        server_args_json=json.dumps({"moe_runner_backend": backend,
                                                     "tp_size": 8}))
    store.add_sanity([{"name": "mul", "prompt": "What is 17*23? Number only.", "expect": "391",
                       "answer": "391", "passed": True, "latency_s": 0.25}], host="ct200",
                     run_id=run_id)
    store.update_run(run_id, sanity_passed=True)
    store.finish_run(run_id, "done")
    return run_id


@pytest.fixture
def two_runs() -> list[int]:
    with RunStore() as store:
        return [seed_run(store, "NVFP4_triton", "triton", 40.0),
                seed_run(store, "NVFP4_marlin", "marlin", 30.0, power=350.0, tensor=0.5)]


class Tables(HTMLParser):
    """Every <td>/<th> of the compare table, with its attributes; the figures' SVG text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[tuple[dict[str, str], str]]]] = []
        self.head: list[str] = []
        self._in = False
        self._cell: tuple[dict[str, str], list[str]] | None = None
        self.json = ""
        self._json = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table" and a.get("id") == "compare-table":
            self._in = True
        elif self._in and tag == "tr":
            self.rows.append((a, []))
        elif self._in and tag in ("td", "th"):
            self._cell = (a, [])
        elif tag == "script" and a.get("id") == "dsv4tui-compare":
            self._json = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._in:
            self._in = False
            self.rows = [r for r in self.rows if r[1]]  # the header's row has no <td>
        elif tag in ("td", "th") and self._cell is not None:
            attrs, text = self._cell
            if tag == "th":
                self.head.append("".join(text))
            else:
                self.rows[-1][1].append((attrs, "".join(text)))
            self._cell = None
        elif tag == "script":
            self._json = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[1].append(data)
        if self._json:
            self.json += data


def figures(text: str) -> dict[str, ET.Element]:
    out = {}
    for key, svg in re.findall(r'<figure id="chart-([a-z0-9_]+)"[^>]*>(<svg.*?</svg>)', text,
                               re.S):
        out[key] = ET.fromstring(svg)  # valid XML, one <svg> element
    return out


def series_runs(svg: ET.Element) -> dict[int, int]:
    """run id -> how many shapes (bars or one line) carry its series id."""
    counts: dict[int, int] = {}
    for el in svg.iter():
        m = re.search(r"series-r(\d+)(?:-c\d+)?$", el.get("id") or "")
        if m:
            counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
    return counts


def test_the_html_report_holds_every_number_of_the_compare_table(
        two_runs: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["runs", "report", *map(str, two_runs), "--out", str(out)]) == 0
    assert f"wrote the report to {out}" in capsys.readouterr().out
    text = out.read_text()
    with RunStore() as store:
        cmp = compare_runs(store, [str(i) for i in two_runs])
    page = Tables()
    page.feed(text)
    assert page.head[:2] == ["C", "run"] and f"vs #{two_runs[0]}" in page.head
    rows = cmp.rows()
    assert len(page.rows) == len(rows) == 6
    checked = 0
    for (attrs, cells), row in zip(page.rows, rows, strict=True):
        assert (int(attrs["data-run"]), int(attrs["data-concurrency"])) == (row.run.id,
                                                                           row.concurrency)
        by_key = {a["data-key"]: (a.get("data-value"), t) for a, t in cells if "data-key" in a}
        for col in COMPARE_COLUMNS:
            value = row.values[col.key]
            if col not in cmp.columns():  # an optional column no run has (goodput): not shown
                assert value is None and col.key not in by_key
                continue
            raw, shown = by_key[col.key]
            assert shown == col.text(value), (col.key, row)
            assert (raw is None) == (value is None)
            if value is not None:
                assert float(raw) == pytest.approx(value, rel=1e-12)
                checked += 1
            if col.change:
                raw, shown = by_key[f"{col.key}_change_pct"]
                change = row.changes[col.key]
                assert shown == ("base" if row.is_baseline else fmt_change(change))
                if change is not None:
                    assert float(raw) == pytest.approx(change, rel=1e-12)
                    checked += 1
    assert checked >= 6 * 5  # tok/s, TTFT p50/p99, TPOT, tensor, tok/s/kW ... with changes
    assert json.loads(page.json) == json.loads(json.dumps(cmp.to_json()))
    # the charts: valid SVG, one series per run (bars: one per run and C)
    figs = figures(text)
    assert set(figs) == {"output_tok_s", "ttft_p50_ms", "tpot_p50_ms", "tensor_active",
                         "tok_s_per_kw", "output_tok_s_change"}
    del figs["output_tok_s_change"]  # its bars are the variants' changes (tests below)
    for key, svg in figs.items():
        assert svg.tag.endswith("svg")
        kind = next(s.kind for s in charts.CHARTS if s.key == key)
        assert series_runs(svg) == {i: 3 if kind == "bar" else 1 for i in two_runs}, key
        labels = "".join(svg.itertext())
        assert "NVFP4_triton" in labels and "NVFP4_marlin" in labels and "C=16" in labels
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # several charts in one page share no id
    # what differs, what ran, sanity, versions
    assert "--moe-runner-backend" in text and "sglang.launch_server" in text
    assert "8 x NVIDIA H200" in text and "0.5.2" in text and "17*23" in text
    # one file: nothing fetched (no link, no script or image from elsewhere)
    assert "<link" not in text and not re.search(r'(src|href)="(https?:)?//', text)


def test_markdown_writes_its_charts_beside_it(two_runs: list[int], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "share").mkdir()  # --out never creates directories (a typo would)
    out = tmp_path / "share" / "fp4 runs.md"
    assert main(["runs", "report", *map(str, two_runs), "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    # five metric charts and the change chart (the variant's change against the baseline)
    assert written["report"] == str(out) and len(written["files"]) == 7
    md = out.read_text()
    links = [unquote(link) for link in re.findall(r"!\[[^\]]*\]\(([^) ]+)\)", md)]
    assert links == [Path(f).name for f in written["files"][1:]]
    assert links[0] == "fp4 runs-output-tok-s-change.svg"
    for name in links[1:]:
        svg = ET.parse(out.parent / name).getroot()
        assert set(series_runs(svg)) == set(two_runs)
    assert "| C | run | tok/s |" in md and "--moe-runner-backend" in md


def test_the_out_suffix_says_the_format_or_is_refused(
        two_runs: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out r.pdf`` wrote HTML into r.pdf: a suffix that is not the report's format is one
    line and exit 2, nothing written; .html/.md pick the format; a suffix and --format that
    disagree are refused."""
    ids = list(map(str, two_runs))
    for name, fmt in (("r.pdf", None), ("r.docx", "html"), ("r.html", "md"), ("r.md", "html")):
        out = tmp_path / name
        argv = ["runs", "report", *ids, "--out", str(out)] + (["--format", fmt] if fmt else [])
        assert main(argv) == 2, name
        captured = capsys.readouterr()
        assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
        assert str(out) in captured.err and captured.out == ""
        assert not out.exists()
    assert "a report is HTML (.html) or Markdown (.md), not .pdf" in main_err(
        capsys, ["runs", "report", *ids, "--out", str(tmp_path / "r.pdf")])
    for name, head in (("r.htm", "<!doctype html>"), ("R.MD", "# ")):
        assert main(["runs", "report", *ids, "--out", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_text().lower().startswith(head.lower()), name
    capsys.readouterr()
    plain = tmp_path / "plain"  # no suffix: --format, else html
    assert main(["runs", "report", *ids, "--out", str(plain), "--format", "md"]) == 0
    assert plain.read_text().startswith("# ")


def main_err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_a_run_without_a_finished_level_is_left_out_and_said(
        two_runs: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as store:
        empty = store.start_run(label="NVFP4_trtllm", host="ct200", backend="trtllm")
        store.finish_run(empty, "failed", "sanity failed: answered 392")
        other = store.start_run(label="cancelled", host="ct200")
        store.finish_run(other, "cancelled")
    out = tmp_path / "r.html"
    # the empty run first: the baseline becomes the first run that measured
    assert main(["runs", "report", str(empty), *map(str, two_runs), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"run #{empty} (NVFP4_trtllm) has no finished level" in err
    text = out.read_text()
    assert "has no finished level (failed: sanity failed: answered 392)" in text
    page = Tables()
    page.feed(text)
    assert {int(a["data-run"]) for a, _ in page.rows} == set(two_runs)
    assert f"vs #{two_runs[0]}" in page.head
    for key, svg in figures(text).items():
        if key != "output_tok_s_change":  # that one's bars are the variants' changes
            assert set(series_runs(svg)) == set(two_runs)
    # none measured: no table, no chart, the message
    assert main(["runs", "report", str(empty), str(other), "--out", str(out)]) == 0
    text = out.read_text()
    assert "none of these runs has a finished level" in text
    assert "compare-table" not in text and "<svg" not in text and "<figure" not in text


def test_report_without_matplotlib_says_how_to_get_it(
        two_runs: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    out = tmp_path / "r.html"
    for argv in (["runs", "report", *map(str, two_runs), "--out", str(out)],
                 ["campaign", "report", "local", "c-nothere"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == ("dsv4tui: error: reports draw their charts with matplotlib: "
                       "pip install 'dsv4tui[report]'"), err
    assert not out.exists()


def test_text_from_runs_is_escaped(tmp_path: Path) -> None:
    with RunStore() as store:
        a = seed_run(store, "<script>alert(1)</script>", "triton", 40.0, levels=(1,))
        b = seed_run(store, "x\x1b[31m|$x$|", "marlin", 30.0, levels=(1,))
        rep = report.build(store, [a, b])
    text = report.to_html(rep)
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "\x1b" not in text and "\\x1b[31m" in text
    md, files = report.to_markdown(rep, "r")
    assert "\x1b" not in md and r"\<script\>" in md
    for svg in files.values():
        ET.fromstring(svg)


def test_launch_flags_as_options() -> None:
    opts = report.argv_options(["/py", "-m", "sglang.launch_server", "--tp-size", "8",
                                "--trust-remote-code", "--mem-fraction-static=0.8",
                                "--cuda-graph-bs", "1", "2", "4", "--dp", "-1"])
    assert opts == {"(program)": "/py -m sglang.launch_server", "--tp-size": "8",
                    "--trust-remote-code": "(set)", "--mem-fraction-static": "0.8",
                    "--cuda-graph-bs": "1 2 4", "--dp": "-1"}


async def test_the_dashboard_saves_its_screen_and_writes_the_marked_runs_report(
        two_runs: list[int]) -> None:
    from plugins.pilot import until

    from dsv4tui.core import paths
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.screens.runs import CompareScreen

    store = RunStore()
    app = Dsv4App(store=store, start_mode="runs")

    def said(needle: str) -> str | None:
        return next((n.message for n in app._notifications if needle in n.message), None)

    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("ctrl+s")
            await until(pilot, lambda: said("screen saved to") is not None, 10, "screenshot")
            [shot] = (paths.data_dir() / "screenshots").glob("dsv4tui-runs-*.svg")
            assert str(shot) in str(said("screen saved to"))
            ET.parse(shot)  # Textual's own SVG screenshot
            await pilot.press("R")  # nothing marked: it says what to do
            await until(pilot, lambda: said("mark the runs") is not None, 5, "the hint")
            app.model.runs.marked[:] = two_runs
            await pilot.press("R")
            await until(pilot, lambda: said("report written to") is not None, 30, "report")
            path = Path(str(said("report written to")).split("report written to ", 1)[1])
            assert path.parent == paths.data_dir() / "reports"
            assert set(series_runs(figures(path.read_text())["output_tok_s"])) == set(two_runs)
            path.unlink()
            app.runs.load_compare(list(two_runs))
            await until(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "compare")
            app._notifications.clear()
            await pilot.press("R")
            await until(pilot, lambda: said("report written to") is not None, 30, "report")
            assert Path(str(said("report written to")).split("to ", 1)[1]).exists()
    finally:
        store.close()


def _bars(text: str) -> list[dict[str, Any]]:
    import html as html_mod

    m = re.search(r'<figure id="chart-output_tok_s_change" data-bars="([^"]*)">', text)
    assert m, "no change chart"
    return json.loads(html_mod.unescape(m.group(1)))


def test_repeats_put_each_variants_interval_on_its_bars(tmp_path: Path) -> None:
    """Three repeats a variant (runs sharing a label): the change chart's bars carry the 95 %
    interval of each variant's change against the baseline per C (an SVG error bar each),
    the same numbers as the verdicts; Markdown says the interval as text."""
    from dsv4tui.core.campaign.verdict import speed_effect

    with RunStore() as store:
        base = [seed_run(store, "NVFP4_marlin", "marlin", g) for g in (40.0, 41.0, 39.0)]
        other = [seed_run(store, "NVFP4_triton", "triton", g) for g in (30.0, 31.5, 30.5)]
        rep = report.build(store, base + other)
        toks = {rid: {lv.concurrency: lv.output_tok_s for lv in store.levels(rid)}
                for rid in base + other}
    text = report.to_html(rep)
    bars = _bars(text)
    assert [(b["label"], b["load"]) for b in bars] == [("NVFP4_triton", f"C={c}")
                                                        for c in (1, 8, 16)]
    for b in bars:
        c = int(b["load"][2:])
        want = speed_effect("output_tok_s", [toks[r][c] for r in other],
                            [toks[r][c] for r in base])
        assert b["change_pct"] == pytest.approx(want.change_pct)
        assert (b["ci_low"], b["ci_high"]) == (pytest.approx(want.ci_low),
                                               pytest.approx(want.ci_high))
        assert b["ci_low"] < b["change_pct"] < b["ci_high"]
    fig = figures(text)["output_tok_s_change"]
    ids = {el.get("id") or "" for el in fig.iter()}
    for c in (1, 8, 16):  # the bar and its error bar, per C
        assert any(i.endswith(f"change-v0-c{c}") for i in ids)
        assert any(i.endswith(f"interval-v0-c{c}") for i in ids)
    assert "95 % interval across restarts" in "".join(fig.itertext())
    md, files = report.to_markdown(rep, "r")
    assert "r-output-tok-s-change.svg" in files
    h = rep.verdicts.bars[2] if rep.verdicts else None
    assert h is not None and h.load_text == "C=16"
    assert md_cell(f"- NVFP4_triton C=16: {h.change_pct:+.1f} % [{h.ci_low:+.1f}, "
                   f"{h.ci_high:+.1f}] faster (n=3/3)") in md


def test_one_run_each_draws_no_interval_and_says_so(two_runs: list[int]) -> None:
    with RunStore() as store:
        rep = report.build(store, two_runs)
    text = report.to_html(rep)
    assert all(b["ci_low"] is None and b["ci_high"] is None for b in _bars(text))
    fig = figures(text)["output_tok_s_change"]
    assert not any("interval-" in (el.get("id") or "") for el in fig.iter())
    assert "one run each: no interval" in "".join(fig.itertext())
    md, _ = report.to_markdown(rep, "r")
    assert "One run each: no interval" in md
    assert "- NVFP4\\_marlin C=16: " in md and "% (one run each: no interval)" in md
