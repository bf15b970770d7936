"""``dsv4tui runs list|show|compare|export|delete`` on a seeded store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


def _req(level: int, index: int, gap: float) -> dict:
    return {"level": level, "concurrency": 1, "index": index, "ok": True, "start_s": index * 1.0,
            "ttft_s": 0.1, "ttfat_s": 0.1, "e2e_s": 0.1 + gap * 9 / 1000, "tpot_s": gap / 1000,
            "output_tokens": 10, "prompt_tokens": 5, "token_source": "usage", "chunks": 10,
            "chunk_gaps_ms": [gap] * 9, "status": 200}


@pytest.fixture
def seeded() -> list[int]:
    ids = []
    with RunStore() as store:
        for label, gap, backend in (("triton", 40.0, "triton"), ("marlin", 30.0, "marlin")):
            run_id = store.start_run(label=label, host="ct200", backend=backend,
                                     checkpoint="NVFP4", gpu_names=["NVIDIA H200"] * 8)
            for li, c in enumerate((1, 8)):
                reqs = [_req(li, i, gap) for i in range(3)]
                for r in reqs:
                    store.add_request(run_id, r)
                level = {**stats.level_metrics(reqs, c, 3), "level": li, "started_at": 10.0,
                         "finished_at": 20.0}
                store.add_level(run_id, level)
                store.set_level_gpus(run_id, li, [
                    {"gpu": g, "frames": 5, "util_mean": 90.0, "tensor_mean": 1.0,
                     "power_mean_w": 400.0} for g in range(2)])
            store.add_sanity([{"name": "c", "answer": "391", "passed": True}], host="ct200",
                             run_id=run_id)
            store.finish_run(run_id, "done")
            ids.append(run_id)
    return ids


def test_list_and_show(seeded: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "list", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in runs] == seeded[::-1]
    assert runs[0]["best_tok_s"] > 0 and runs[0]["gpu_names"][0] == "NVIDIA H200"
    assert main(["runs", "list"]) == 0
    text = capsys.readouterr().out
    assert "triton" in text and "marlin" in text and "best tok/s" in text
    assert main(["runs", "show", str(seeded[0]), "--json"]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert set(detail) == {"run", "levels", "sanity", "server", "server_args_differences"}
    assert [lv["concurrency"] for lv in detail["levels"]] == [1, 8]
    assert detail["levels"][0]["power_w"] == 800.0 and detail["levels"][0]["tok_s_per_kw"] > 0
    assert main(["runs", "show", "marlin"]) == 0  # by label
    text = capsys.readouterr().out
    assert "run 2: marlin" in text and "tok/s/kW" in text and "sanity PASS" in text


def test_compare(seeded: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "compare", *map(str, seeded), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"] == seeded[0]
    assert [(r["concurrency"], r["run_id"]) for r in data["rows"]] == [
        (1, seeded[0]), (1, seeded[1]), (8, seeded[0]), (8, seeded[1])]
    base, new = data["rows"][0], data["rows"][1]
    assert base["is_baseline"] and not new["is_baseline"]
    assert base["output_tok_s_change_pct"] == 0.0 and new["output_tok_s_change_pct"] > 0
    assert new["ttft_p50_ms_change_pct"] == 0.0 and new["tok_s_per_kw"] is not None
    assert main(["runs", "compare", *map(str, seeded)]) == 0
    text = capsys.readouterr().out
    assert f"vs #{seeded[0]}" in text and "TTFT p50 ms" in text and "%" in text


def test_compare_names_the_baseline_it_was_given(seeded: list[int],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``runs compare 2 1`` is against run 2, and says so (it said ``vs #1``)."""
    first, second = seeded
    assert main(["runs", "compare", str(second), str(first)]) == 0
    text = capsys.readouterr().out
    assert f"vs #{second}" in text and f"vs #{first}" not in text
    header = next(line for line in text.splitlines() if line.startswith("C "))
    assert "TTFT p50 ms" in header and "TTFT ms" not in header  # the statistic is named
    assert main(["runs", "compare", str(first), str(second), "--baseline", str(second),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"] == second
    row = next(r for r in data["rows"] if r["run_id"] == second)
    assert row["output_tok_s_change_pct"] == 0.0
    assert main(["runs", "compare", str(first), str(second), "--baseline", "999"]) == 2  # no such run


def test_compare_csv_holds_numbers(seeded: list[int], capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    assert main(["runs", "compare", *map(str, seeded), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 4
    for row in rows:  # a spreadsheet reads every number as a number
        float(row["output_tok_s"]), float(row["output_tok_s_change_pct"])
        assert "," not in row["output_tok_s"] and "%" not in row["output_tok_s_change_pct"]
        assert row["baseline_run_id"] == str(seeded[0])
    assert [r["is_baseline"] for r in rows] == ["1", "0", "1", "0"]


def test_export_formats(seeded: list[int], capsys: pytest.CaptureFixture[str],
                        tmp_path: Path) -> None:
    assert main(["runs", "export", str(seeded[0])]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["requests"]) == 6 and data["run"]["label"] == "triton"
    assert main(["runs", "export", str(seeded[0]), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 6 and rows[-1]["concurrency"] == "8" and rows[0]["ok"] == "1"
    out = tmp_path / "run.md"
    assert main(["runs", "export", str(seeded[0]), "--format", "md", "-o", str(out)]) == 0
    md = out.read_text()
    assert md.startswith("## Run 1: triton") and md.count("\n| ") == 3  # header + 2 levels
    assert "TTFT p50 ms" in md and "TTFT mean ms" in md
    # --json (documented) is the JSON export; --all: every run
    assert main(["runs", "export", str(seeded[0]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["id"] == seeded[0]
    assert main(["runs", "export", "--all"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [d["run"]["id"] for d in everything["runs"]] == seeded
    assert all(len(d["requests"]) == 6 for d in everything["runs"])
    assert main(["runs", "export", "--all", "--format", "csv"]) == 2
    assert "--all writes JSON" in capsys.readouterr().err


def test_delete_asks_or_takes_yes(seeded: list[int], capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # no terminal and no --yes: refused, one line, nothing deleted
    assert main(["runs", "delete", str(seeded[0])]) == 2
    err = capsys.readouterr().err.strip()
    assert "without --yes" in err and len(err.splitlines()) == 1
    # a terminal: it asks, and "n" keeps the run
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    answers = iter(["n", "y"])
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or next(answers))
    assert main(["runs", "delete", str(seeded[0])]) == 1
    assert "nothing deleted" in capsys.readouterr().out
    assert "2 level(s), 6 request(s)" in asked[0] and asked[0].endswith("[y/N] ")
    assert main(["runs", "delete", str(seeded[0])]) == 0
    assert capsys.readouterr().out.startswith(f"deleted run {seeded[0]} (triton, done")
    with RunStore() as store:
        assert [r.id for r in store.runs()] == [seeded[1]]


def test_delete_and_bad_ids(seeded: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "delete", str(seeded[0]), "--json", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "deleted": seeded[0], "label": "triton", "levels": 2, "requests": 6,
        "sanity_results": 1, "kernel_captures_unlinked": 0}
    for argv in (["runs", "show", str(seeded[0])], ["runs", "delete", "nope"],
                 ["runs", "compare", str(seeded[1]), "999"], ["runs", "export", "42"],
                 ["runs", "report", str(seeded[1]), "999"]):
        assert main(argv) == 2  # what was named is not there: bad usage (README)
        err = capsys.readouterr().err.strip()
        assert err.startswith("dsv4tui: error: no run with") and len(err.splitlines()) == 1
    with RunStore() as store:
        assert [r.id for r in store.runs()] == [seeded[1]]  # nothing else was lost


def test_unusable_store_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from dsv4tui.core import paths

    paths.store_file().write_bytes(b"garbage" * 200)
    assert main(["runs", "list"]) == 1
    err = capsys.readouterr().err.strip()
    assert "cannot use the run store" in err and len(err.splitlines()) == 1
    assert paths.store_file().read_bytes() == b"garbage" * 200


def test_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "list"]) == 0
    assert "no runs yet" in capsys.readouterr().out
    assert main(["runs", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
