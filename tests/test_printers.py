"""What a person watching ``dsv4tui sweep`` / ``campaign attach`` reads on stderr, from the
journal's events through the reducer (cli/sweep.Progress, cli/campaign.Printer)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsv4tui.cli.campaign import Printer
from dsv4tui.cli.sweep import Progress
from dsv4tui.core.campaign.ingest import Collector
from dsv4tui.core.store import RunStore


def test_the_sweep_progress_line_counts_requests_and_ends_with_the_levels_numbers() -> None:
    out = io.StringIO()
    p = Progress(out)
    for ev in ({"type": "level_start", "level": 0, "concurrency": 8, "requests": 3},
               {"type": "request", "ok": True}, {"type": "request", "ok": False},
               {"type": "level_progress", "completed": 1, "output_tok_s": 5.0},
               {"type": "request", "ok": True},
               {"type": "level", "output_tok_s": 12.5, "ttft_ms": {"p50": 41.0},
                "status": "partial"},
               {"type": "notice", "message": "the server is busy"},
               {"type": "sanity_case", "name": "arith", "passed": True, "answer": " 391"}):
        p(ev)
    assert out.getvalue().splitlines() == [
        "C=8    3/3 done, 1 errors  12.5 tok/s  TTFT p50 41 ms  (partial)",
        "note: the server is busy", "sanity arith: ok ('391')"]


def test_an_event_the_store_refuses_is_named_by_its_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        told = Collector(store, "h", "c1").apply_batch([
            {"type": "journal_pos", "offset": "not a number", "seq": 12}])
    assert [(t["type"], t["seq"], t["event_type"]) for t in told] == [
        ("ingest_error", 12, "journal_pos")]
    out = io.StringIO()
    Progress(out)(told[0])
    Printer()(told[0])
    assert "journal event 12 (journal_pos) could not be stored: ValueError" in out.getvalue()
    assert "journal event 12 (journal_pos) could not be stored: ValueError" in \
        capsys.readouterr().err


def test_the_campaign_printer_says_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    p = Printer()
    for ev in ({"type": "campaign_start", "variants": [{"name": "a"}, {"name": "b"}]},
               {"type": "variant_start", "variant": 1, "name": "b", "restart": True},
               {"type": "launch_start", "variant": 1, "launch": "v1.r1.a0"},
               {"type": "log_event", "event": {"kind": "phase", "name": "load_weights",
                                               "duration_s": 3.5}},
               {"type": "log_event", "event": {"kind": "decode"}},
               {"type": "level", "concurrency": 8, "completed": 4, "requests": 4,
                "output_tok_s": 99.0},
               {"type": "run_end", "status": "done"},
               {"type": "variant_end", "state": "done"}):
        p(ev)
    assert capsys.readouterr().err.splitlines() == [
        "[2/2] b: restarting the server", "[2/2] b: repeat 2, restarting the server",
        "    load_weights     3.50 s", "    C=8    4/4 done  99.0 tok/s", "    -> done"]
