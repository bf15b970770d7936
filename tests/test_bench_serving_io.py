"""``runs export --format bench-serving`` and ``runs import`` (issue 17): SGLang bench_serving's
result lines out and in, the round trip keeping the shared numbers, imported runs in the
same compare view with their goodput column."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import REPO, KnownServer

from dsv4tui.core.campaign import bench_serving, export
from dsv4tui.core.campaign.compare import compare_runs, run_server_facts
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def test_export_import_round_trip_keeps_the_shared_metrics(
        known_server: Callable[..., KnownServer], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    srv = known_server(ttft_ms=25, itl_ms=2)
    assert main(["sweep", "--url", srv.url, "--label", "ours", "--levels", "2:8,4:12",
                 "--rates", "30:20", "--output-len", "12", "--input-len", "8", "--no-sanity",
                 "--goodput", "ttft:100,tpot:10", "--seed", "4", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    out = tmp_path / "ours.jsonl"
    assert main(["runs", "export", str(run_id), "--format", "bench-serving", "-o",
                 str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3
    first, rate = lines[0], lines[2]
    # bench_serving's own keys (sglang benchmark/metrics.py save_results)
    for key in ("backend", "dataset_name", "request_rate", "max_concurrency",
                "random_input_len", "random_output_len", "random_range_ratio", "duration",
                "completed", "total_input", "total_output", "request_throughput",
                "input_throughput", "output_throughput", "total_throughput", "mean_ttft_ms",
                "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p95_itl_ms", "p99_itl_ms",
                "max_itl_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms",
                "p99_e2e_latency_ms", "concurrency"):
        assert key in first, key
    assert first["request_rate"] == math.inf and first["max_concurrency"] == 2  # closed loop
    assert rate["request_rate"] == 30.0 and rate["max_concurrency"] is None
    assert first["completed"] == 8 and first["total_output"] == 96
    assert 25 < first["mean_ttft_ms"] < 200 and first["request_goodput"] > 0
    assert main(["runs", "import", str(out), "--label", "back", "--json"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert back["levels"] == 3
    with RunStore() as store:
        mine = store.levels(run_id)
        theirs = store.levels(back["run_id"])
        assert [(lv.concurrency, lv.stats.get("rate")) for lv in theirs] == \
            [(2, None), (4, None), (0, 30.0)]
        for a, b in zip(mine, theirs, strict=True):
            assert bench_serving.shared_values(b.stats) == bench_serving.shared_values(a.stats)
            assert b.requests == a.requests
            assert b.stats["goodput"]["share"] == a.stats["goodput"]["share"]
        run = store.run(back["run_id"])
        assert run is not None and run.host == "imported" and run.profile_name == "bench_serving"
        assert "bench_serving" in (run.error or "") and run.plan["imported"]["definitions"]
        cmp = compare_runs(store, [str(run_id), str(back["run_id"])])
    rows = cmp.rows()
    assert [(r.load, r.run.id) for r in rows[::2]] == [("C=2", run_id), ("C=4", run_id),
                                                       ("30 req/s", run_id)]
    assert all(r.changes["output_tok_s"] == 0.0 for r in rows)
    assert all(r.values["goodput_pct"] == 100.0 for r in rows)
    header, *body = list(csv.reader(io.StringIO(export.compare_csv(cmp))))
    assert "goodput_pct" in header and len(body) == 6
    assert cmp.differences() == []  # the import says what it knows, and it is the same
    assert main(["runs", "compare", str(run_id), str(back["run_id"])]) == 0
    text = capsys.readouterr().out
    assert "goodput %" in text and "30 req/s" in text


SGLANG_LINE = {  # what bench_serving --output-file appends (its key names and types)
    "backend": "sglang", "dataset_name": "random", "request_rate": 4.0, "max_concurrency": 64,
    "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 256,
    "random_range_ratio": 0.5, "duration": 50.0, "completed": 200, "total_input": 153600,
    "total_output": 38400, "total_output_retokenized": 38350, "request_throughput": 4.0,
    "input_throughput": 3072.0, "output_throughput": 768.0,
    "output_throughput_retokenized": 767.0, "total_throughput": 3840.0,
    "total_throughput_retokenized": 3839.0, "mean_ttft_ms": 120.5, "median_ttft_ms": 110.0,
    "std_ttft_ms": 30.0, "p99_ttft_ms": 250.0, "mean_tpot_ms": 25.0, "median_tpot_ms": 24.0,
    "std_tpot_ms": 2.0, "p99_tpot_ms": 31.0, "mean_itl_ms": 25.1, "median_itl_ms": 23.0,
    "std_itl_ms": 5.0, "p95_itl_ms": 35.0, "p99_itl_ms": 60.0, "max_itl_ms": 180.0,
    "mean_e2e_latency_ms": 6500.0, "median_e2e_latency_ms": 6400.0,
    "std_e2e_latency_ms": 800.0, "p99_e2e_latency_ms": 9000.0, "concurrency": 26.0,
    "accept_length": None}


def test_import_reads_bench_serving_lines_as_a_run(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sglang_1201_200_1024_256.jsonl"
    closed = {**SGLANG_LINE, "request_rate": float("inf"), "max_concurrency": 16}
    vllm_style = {k: v for k, v in SGLANG_LINE.items() if "e2e_latency" not in k}
    vllm_style.update(mean_e2el_ms=7000.0, median_e2el_ms=6900.0, p99_e2el_ms=9900.0,
                      request_goodput=3.0, failed=2, request_rate=8.0)
    path.write_text("\n".join(json.dumps(x) for x in (closed, SGLANG_LINE, vllm_style)) + "\n")
    assert main(["runs", "import", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    with RunStore() as store:
        run = store.run(got["run_id"])
        assert run is not None and run.label == "sglang_1201_200_1024_256"
        c16, r4, r8 = (lv.stats for lv in store.levels(got["run_id"]))
    assert (c16["concurrency"], c16["rate"], c16["kind"]) == (16, None, "closed")
    assert (r4["concurrency"], r4["rate"], r4["max_concurrency"]) == (64, 4.0, 64)
    assert r4["ttft_ms"] == {"mean": 120.5, "p50": 110.0, "p90": None, "p99": 250.0}
    assert r4["e2e_ms"]["p50"] == 6400.0 and r4["output_tok_s"] == 768.0
    assert r4["input_tokens_mean"] == 768.0 and r4["token_count_source"] == "imported"
    assert r4["imported"]["definitions"].startswith("bench_serving's definitions")
    assert r8["e2e_ms"]["mean"] == 7000.0 and r8["errors"] == 2 and r8["requests"] == 202
    assert r8["goodput"]["rate"] == 3.0 and r8["goodput"]["good"] == 150
    assert run.plan["input_len"] == 1024 and run.plan["random_range_ratio"] == 0.5


@pytest.mark.parametrize(("text", "message"), [
    ("", "x.jsonl: no result lines"),
    ('{"completed": 1, "duration": 1.0}\nnope\n', "x.jsonl line 2: not JSON (Expecting value)"),
    ('[1]\n', "x.jsonl line 1: not a JSON object"),
    ('{"completed": 3}\n', "x.jsonl line 1: not a bench_serving result (no completed / "
     "duration)"),
    ('{"completed": 5, "duration": 0}\n', "x.jsonl line 1: duration must be > 0"),
    ('{"completed": -5, "duration": 2, "output_throughput": -100}\n',
     "x.jsonl line 1: completed, output_throughput must be numbers >= 0"),
    ('{"completed": 5, "duration": 2, "output_throughput": NaN}\n',
     "x.jsonl line 1: output_throughput must be numbers >= 0"),
])
def test_import_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     text: str, message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    assert main(["runs", "import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(message) and "\n" not in err
    with RunStore() as store:
        assert store.runs() == []  # nothing half-imported


def test_a_simulated_run_exported_and_imported_back_is_still_simulated(
        sims: list, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """bench_serving's format has no place for 'this was the simulator': our "dsv4tui" key
    carries it (bench_serving ignores it), and the import reads it, so the imported run says
    SIM wherever a simulated run does."""
    from plugins.sim import start_sim

    sim = start_sim(tmp_path / "sim")
    sims.append(sim)
    sim.wait_ready()
    assert main(["sweep", "--url", sim.url, "--label", "simmed", "--levels", "1:2",
                 "--output-len", "4", "--no-sanity", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    out = tmp_path / "simmed.jsonl"
    assert main(["runs", "export", str(run_id), "--format", "bench-serving", "-o",
                 str(out)]) == 0
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["dsv4tui"]["simulated"] is True and line["dsv4tui"]["backend"] == "triton"
    # where bench_serving keeps /server_info: what the run's server said it ran
    assert line["server_info"]["moe_runner_backend"] == "triton"
    assert line["server_info"]["version"].startswith("0.5.")
    assert main(["runs", "import", str(out), "--label", "simmed-back", "--json"]) == 0
    back = json.loads(capsys.readouterr().out)["run_id"]
    with RunStore() as store:
        run = store.run(back)
        assert run is not None and run.simulated and run.backend == "triton"
        facts = run_server_facts(store, [run_id, back])
    assert facts[back]["args"] == facts[run_id]["args"] and facts[back]["args"]["tp_size"] == 8
    assert facts[back]["sglang_version"] == facts[run_id]["sglang_version"]
    capsys.readouterr()
    assert main(["runs", "list"]) == 0
    [row] = [ln for ln in capsys.readouterr().out.splitlines() if "simmed-back" in ln]
    assert "SIM" in row
    assert main(["runs", "show", str(back)]) == 0
    assert "SIMULATED" in capsys.readouterr().out


DATA = REPO / "tests" / "data" / "bench_serving"  # written by SGLang's own bench_serving


def _lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (DATA / name).read_text().splitlines()]


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_import_keeps_the_server_info_as_the_runs_server_facts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_serving keeps the server's /server_info in each line: the import stores it where
    a sweep stores what the server said it ran (backend, checkpoint, version, server args,
    source "imported"), so `runs show` and `runs compare` tell two imported servers apart.
    Before: `backend -`, "no server args recorded", compare silent."""
    lines = _lines("sglang_native_streamed.jsonl")
    lines[0]["server_info"]["api_key"] = "sk-secret-key"  # a real server's info may hold it
    lines[0]["server_info"]["launch_command"] += " --api-key sk-secret-key"
    triton = _write(tmp_path / "triton.jsonl", lines[:1])
    other = json.loads(json.dumps(lines[1]))
    other["server_info"].update(moe_runner_backend="marlin", quantization="modelopt_fp4",
                                simulated={"checkpoint": "NVFP4"})
    marlin = _write(tmp_path / "marlin.jsonl", [other])
    assert main(["runs", "import", str(triton), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "import", str(marlin), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)["run_id"]
    with RunStore() as store:
        run = store.run(first)
        assert run is not None
        assert (run.backend, run.checkpoint, run.server_version, run.model) == \
            ("triton", "MXFP4", "0.5.23", "dsv4-sim")
        assert run.simulated  # the simulator's /server_info says so
        [row] = store.query("SELECT meta_source, quantization, attention_backend, "
                            "server_args_json FROM runs WHERE id = ?", (first,))
    assert (row["meta_source"], row["attention_backend"]) == ("imported", "dsv4")
    args = json.loads(row["server_args_json"])
    assert args["tp_size"] == 8 and args["moe_runner_backend"] == "triton"
    assert "sk-secret-key" not in row["server_args_json"]  # secrets never stored
    assert main(["runs", "show", str(first)]) == 0
    shown = capsys.readouterr().out
    assert "backend triton" in shown and "checkpoint MXFP4" in shown
    assert f"SGLang 0.5.23 · {len(args)} server args recorded" in shown
    assert "no server args recorded" not in shown
    assert main(["runs", "compare", str(first), str(second)]) == 0
    text = capsys.readouterr().out
    assert "the servers differ:" in text
    assert f"moe_runner_backend: #{first} triton, #{second} marlin" in text
    assert "no server facts" not in text


def test_a_file_appended_across_two_servers_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_serving appends to one file whatever served it; one run is one server, so lines
    of two servers are refused (one line naming what differs), nothing half-imported."""
    a, b = _lines("sglang_native_streamed.jsonl")
    b["server_info"]["moe_runner_backend"] = "marlin"
    path = _write(tmp_path / "mixed.jsonl", [a, b])
    assert main(["runs", "import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "mixed.jsonl: its lines come from different servers" in err
    assert "moe_runner_backend: #1 triton, #2 marlin" in err
    with RunStore() as store:
        assert store.runs() == []


def test_a_tiny_negative_tpot_from_bench_serving_reads_as_zero_with_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real file from `bench_serving --backend sglang` against a server that answered in
    one chunk: its TPOT is -0.00016 ms (its own float arithmetic). Before: refused, exit 2."""
    [line] = _lines("sglang_native_one_chunk.jsonl")
    assert -1e-3 < line["mean_tpot_ms"] < 0  # what the tool wrote
    path = DATA / "sglang_native_one_chunk.jsonl"
    assert main(["runs", "import", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("imported run ")
    assert "note: sglang_native_one_chunk.jsonl line 1: mean_tpot_ms -0.00016" in err
    assert "read as 0" in err
    with RunStore() as store:
        [run] = store.runs()
        [level] = store.levels(run.id)
    assert level.stats["tpot_ms"] == {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    assert level.stats["imported"]["read_as_zero"]["mean_tpot_ms"] == line["mean_tpot_ms"]
    assert level.stats["ttft_ms"]["p50"] == line["median_ttft_ms"]  # the rest as written
    assert "read as 0" in (run.error or "")
    assert main(["runs", "show", str(run.id)]) == 0
    assert "mean_tpot_ms -0.00016" in capsys.readouterr().out  # the note stays with the run
    # real nonsense is still refused, naming the file, the line and the key
    bad = dict(line, p99_tpot_ms=-7.5)
    assert main(["runs", "import", str(_write(tmp_path / "bad.jsonl", [line, bad]))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("bad.jsonl line 2: p99_tpot_ms must be numbers >= 0")
    # tiny is relative to the line's latencies too: 0.005 ms below zero beside 1.3 s is noise
    ok = dict(line, p99_tpot_ms=-0.005)
    assert main(["runs", "import", str(_write(tmp_path / "ok.jsonl", [ok])), "--json"]) == 0
    assert "p99_tpot_ms" in json.loads(capsys.readouterr().out)["notes"][0]
    assert main(["runs", "import", str(_write(tmp_path / "count.jsonl",
                                              [dict(line, completed=-0.0001)]))]) == 2
    assert "completed must be numbers >= 0" in capsys.readouterr().err
