"""``runs import`` of other tools' result files (issue 29): aiperf's profile export, guidellm's
benchmarks report (JSON and YAML), vllm bench serve's result JSON, beside bench_serving's, each
recognised by content; the tool and version kept; what the tool knew of the server as the
run's server facts; one-line errors; nothing half-imported; ``runs compare`` naming whose
definitions each column follows. The fixtures are the tools' own files from one simulator
(tests/data/<tool>/README.md), and one test measures the same server with our sweep."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from plugins.bench_server import REPO

from dsv4tui.core.campaign import bench_serving
from dsv4tui.core.campaign.compare import run_server_facts
from dsv4tui.core.imports import record
from dsv4tui.core.store import RunStore
from dsv4tui.main import main

DATA = REPO / "tests" / "data"
AIPERF_JSON = DATA / "aiperf" / "profile_export_aiperf.json"
AIPERF_JSONL = DATA / "aiperf" / "profile_export.jsonl"
GUIDELLM_JSON = DATA / "guidellm" / "benchmarks.json"
GUIDELLM_YAML = DATA / "guidellm" / "benchmarks.yaml"
VLLM_JSON = DATA / "vllm" / "openai-chat-infqps-concurrency8-dsv4-sim.json"
BENCH_SERVING = DATA / "bench_serving" / "sglang_native_streamed.jsonl"


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _import(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    capsys.readouterr()
    assert main(["runs", "import", str(path), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _runs() -> int:
    with RunStore() as store:
        return len(store.runs())


@pytest.mark.parametrize(("src", "tool", "version", "requests"), [
    (AIPERF_JSON, "aiperf", "0.13.0", 32), (AIPERF_JSONL, "aiperf", "0.13.0", 32),
    (GUIDELLM_JSON, "guidellm", "0.8.1", 32), (GUIDELLM_YAML, "guidellm", "0.8.1", 32),
    (VLLM_JSON, "vllm bench serve", None, 32)])
def test_each_tools_file_is_recognised_by_its_content(
        src: Path, tool: str, version: str | None, requests: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Renamed to a name that says nothing (result.txt), each file still reads as its tool's,
    one level (C=8) with the requests the file kept, marked imported with the tool and its
    version; the model the tool asked for is the run's model and its server facts."""
    # aiperf's aggregate keeps the records file beside it: copy the folder, rename the file
    folder = tmp_path / "d"
    folder.mkdir()
    if src.parent.name == "aiperf":
        for f in src.parent.glob("profile_export*"):
            shutil.copy(f, folder / f.name)
        dst = folder / "result.txt"
        (folder / src.name).rename(dst)
        if src == AIPERF_JSON:  # the records file must keep its name to be found beside it
            shutil.copy(AIPERF_JSONL, folder / "profile_export.jsonl")
    else:
        dst = folder / "result.txt"
        shutil.copy(src, dst)
    got = _import(dst, capsys)
    assert (got["tool"], got["version"], got["levels"], got["requests"]) == \
        (tool, version, 1, requests)
    with RunStore() as store:
        run = store.run(got["run_id"])
        assert run is not None and run.host == "imported" and run.model == "dsv4-sim"
        assert run.plan["imported"]["tool"] == tool and run.plan["imported"]["version"] == version
        [lv] = store.levels(run.id)
        assert (lv.concurrency, lv.stats["completed"], lv.stats["output_tokens"]) == (8, 32, 2048)
        assert len(store.requests(run.id)) == requests
        facts = run_server_facts(store, [run.id])[run.id]
    key = "model_id" if tool.startswith("vllm") else "served_model_name"
    assert facts["args"][key] == "dsv4-sim"
    assert not run.simulated  # the file does not say; --simulated does
    again = _import(dst, capsys, "--simulated", "--label", "sim")
    with RunStore() as store:
        back = store.run(again["run_id"])
    assert back is not None and back.simulated and back.label == "sim"


def test_the_imported_numbers_are_the_tools_own(capsys: pytest.CaptureFixture[str]) -> None:
    """The stored numbers are the ones each tool wrote, each in the column that means the same
    (aiperf's and guidellm's "inter token latency" is (latency - TTFT) / (n - 1): TPOT)."""
    aiperf = json.loads(AIPERF_JSON.read_text())
    guide = json.loads(GUIDELLM_JSON.read_text())["benchmarks"][0]["metrics"]
    vllm = json.loads(VLLM_JSON.read_text())
    ids = {name: _import(p, capsys)["run_id"] for name, p in
           (("aiperf", AIPERF_JSON), ("guidellm", GUIDELLM_JSON), ("vllm", VLLM_JSON))}
    with RunStore() as store:
        a, g, v = (store.levels(ids[k])[0].stats for k in ("aiperf", "guidellm", "vllm"))
    assert a["output_tok_s"] == aiperf["output_token_throughput"]["avg"]
    assert a["ttft_ms"]["p50"] == aiperf["time_to_first_token"]["p50"]
    assert a["tpot_ms"]["p50"] == aiperf["inter_token_latency"]["p50"]
    assert a["itl_ms"]["p50"] == aiperf["inter_chunk_latency"]["p50"]
    assert a["duration_s"] == aiperf["benchmark_duration"]["avg"]
    assert g["ttft_ms"]["p50"] == guide["time_to_first_token_ms"]["successful"]["median"]
    assert g["tpot_ms"]["p50"] == guide["inter_token_latency_ms"]["successful"]["median"]
    assert g["imported"]["time_per_output_token_ms"]["p50"] == \
        guide["time_per_output_token_ms"]["successful"]["median"]
    assert g["output_tok_s"] == guide["output_tokens_per_second"]["successful"]["mean"]
    assert g["e2e_ms"]["p50"] == pytest.approx(
        guide["request_latency"]["successful"]["median"] * 1000)
    assert (v["ttft_ms"]["p50"], v["tpot_ms"]["p99"], v["output_tok_s"]) == \
        (vllm["median_ttft_ms"], vllm["p99_tpot_ms"], vllm["output_throughput"])


def test_compare_names_the_definitions_and_warns_where_they_mix(
        capsys: pytest.CaptureFixture[str]) -> None:
    """aiperf (tokens by its tokenizer), guidellm (usage) and vllm (TTFT at the role-only
    chunk) in one comparison: each run's line says its tool's definitions, and the metrics
    they define differently are warned about; two runs of one tool are not."""
    ids = [str(_import(p, capsys)["run_id"]) for p in (AIPERF_JSON, GUIDELLM_JSON, VLLM_JSON)]
    capsys.readouterr()
    assert main(["runs", "compare", *ids]) == 0
    out = capsys.readouterr().out
    assert f"#{ids[0]} aiperf 0.13.0: TTFT = first response with content or reasoning" in out
    assert f"#{ids[2]} vllm bench serve: TTFT = first SSE message with non-empty choices" in out
    warns = [ln for ln in out.splitlines() if ln.startswith("warning: the columns mix")]
    assert len(warns) == 2
    assert f"TTFT: #{ids[0]} aiperf, #{ids[1]} guidellm: first content or reasoning token; " \
           f"#{ids[2]} vllm bench serve: first message with choices" in warns[0]
    assert f"output tokens: #{ids[0]} aiperf: the client's tokenizer; #{ids[1]} guidellm, " \
           f"#{ids[2]} vllm bench serve: the server's usage" in warns[1]
    assert main(["runs", "compare", *ids, "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["definitions"][ids[1]]["tool"] == "guidellm"
    assert len(cmp["definition_differences"]) == 2
    assert main(["runs", "compare", *ids, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "Definitions (docs/metrics.md):" in md and md.count("- warning: the columns mix") == 2
    again = str(_import(GUIDELLM_YAML, capsys)["run_id"])
    assert main(["runs", "compare", ids[1], again]) == 0
    out = capsys.readouterr().out
    assert "definitions (docs/metrics.md):" in out and "warning: the columns mix" not in out


@pytest.mark.parametrize(("name", "text", "message"), [
    ("p.jsonl", None, "p.jsonl line 5: not JSON"),
    ("b.json", "guidellm-neg", "b.json key benchmarks[0].metrics.time_to_first_token_ms"
                               ".successful: median must be a number >= 0 (got -3)"),
    ("b.json", "guidellm-strategy", "b.json key benchmarks[1].config.strategy: missing"),
    ("v.json", "vllm-lists", "v.json key itls: must be a list of 32 (one per request, "
                             "as ttfts)"),
    ("a.json", "aiperf-unit", "a.json key time_to_first_token.unit: unknown time unit 'hours'"),
    ("x.json", '{\n  "hello": 1\n}\n', "x.json: a JSON object, but not a result file of SGLang "
                               "bench_serving, vllm bench serve, aiperf or guidellm"),
])
def test_a_bad_file_is_one_line_naming_the_line_or_key_and_stores_nothing(
        name: str, text: str | None, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    if text is None:  # aiperf records, line 5 cut short
        lines = AIPERF_JSONL.read_text().splitlines()
        lines[4] = lines[4][:50]
        text = "\n".join(lines) + "\n"
    elif text.startswith("guidellm"):
        report = json.loads(GUIDELLM_JSON.read_text())
        if text == "guidellm-neg":
            report["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"][
                "median"] = -3
        else:  # a second benchmark, broken: the first (good) one is not kept either
            second = json.loads(json.dumps(report["benchmarks"][0]))
            del second["config"]["strategy"]
            report["benchmarks"].append(second)
        text = json.dumps(report)
    elif text == "vllm-lists":
        obj = json.loads(VLLM_JSON.read_text())
        obj["itls"] = obj["itls"][:5]
        text = json.dumps(obj)
    elif text == "aiperf-unit":
        obj = json.loads(AIPERF_JSON.read_text())
        obj["time_to_first_token"]["unit"] = "hours"
        text = json.dumps(obj)
    path = tmp_path / name
    path.write_text(text)
    before = _runs()
    capsys.readouterr()
    assert main(["runs", "import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"runs import: {message}" in err
    assert _runs() == before


def test_a_failure_while_storing_leaves_nothing_behind(tmp_path: Path) -> None:
    """The run, its server facts, its levels and its requests are one transaction: a level
    the store refuses half-way (no concurrency) takes the run and the levels before it."""
    from dsv4tui.core.imports import parse_file

    run = parse_file(str(GUIDELLM_JSON))
    good = run.levels[0]
    broken = {k: v for k, v in good.items() if k != "concurrency"}
    run.levels = [good, dict(broken, level=1)]
    with RunStore() as store:
        before = len(store.runs())
        with pytest.raises(KeyError):
            record.save(store, run)
        assert len(store.runs()) == before
        assert store.query("SELECT count(*) AS n FROM levels")[0]["n"] == 0
        assert store.query("SELECT count(*) AS n FROM requests")[0]["n"] == 0


def test_bench_serving_files_and_the_export_round_trip_still_read_as_before(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench_serving's lines go through the same dispatcher; an imported aiperf run exported
    as bench_serving lines and read back keeps every shared number."""
    got = _import(BENCH_SERVING, capsys)
    assert (got["tool"], got["levels"]) == ("sglang bench_serving", 2)
    first = _import(AIPERF_JSON, capsys)["run_id"]
    out = tmp_path / "again.jsonl"
    assert main(["runs", "export", str(first), "--format", "bench-serving", "-o",
                 str(out)]) == 0
    back = _import(out, capsys)["run_id"]
    with RunStore() as store:
        a, b = store.levels(first)[0].stats, store.levels(back)[0].stats
    shared = bench_serving.shared_values(a)
    assert bench_serving.shared_values(b) == shared and shared["ttft_ms.p50"] is not None


def test_each_tool_against_our_sweep_of_the_same_server(
        sims: list, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The four tools' files were measured on a simulator at decode speed 20, chat, C=8, 32
    requests of 64 tokens in / 64 out (bench_serving: 16 requests, its native /generate);
    our sweep measures a simulator started the same way. Each imported number is held to what
    the definitions explain (docs/metrics.md), with the timing noise of a shared 2-core box:

    - output tokens: exactly 64 a request everywhere (ignore_eos; aiperf's tokenizer splits as
      the simulator counts, so its count equals usage);
    - output tok/s and TPOT: the same definition in every tool, so within 25 % of ours;
    - TTFT: vllm's is the role-only chunk, sent before any token: below half of ours; the
      others (first content or reasoning) within a factor 2.5 of ours (TTFT at C=8 is mostly
      queueing behind the other requests' prefill, which moves with the box's load).
    """
    from plugins.sim import start_sim

    sim = start_sim(tmp_path / "sim")
    sims.append(sim)
    sim.wait_ready()
    assert main(["sweep", "--url", sim.url, "--label", "ours", "--levels", "8:32",
                 "--input-len", "64", "--output-len", "64", "--no-sanity", "--json"]) == 0
    ours_id = json.loads(capsys.readouterr().out)["run_id"]
    ids = {name: _import(p, capsys)["run_id"] for name, p in
           (("aiperf", AIPERF_JSON), ("guidellm", GUIDELLM_JSON), ("vllm", VLLM_JSON),
            ("bench_serving", BENCH_SERVING))}
    with RunStore() as store:
        ours = store.levels(ours_id)[0].stats
        theirs = {k: store.levels(i)[0].stats for k, i in ids.items()}
    assert ours["output_tokens"] == 32 * 64
    for name, lv in theirs.items():
        assert lv["output_tokens"] == lv["completed"] * 64, name
        tok_s = lv["output_tok_s"] / ours["output_tok_s"]
        tpot = lv["tpot_ms"]["p50"] / ours["tpot_ms"]["p50"]
        assert 0.8 < tok_s < 1.25, (name, tok_s)
        assert 0.8 < tpot < 1.25, (name, tpot)
        ttft = lv["ttft_ms"]["p50"] / ours["ttft_ms"]["p50"]
        if name == "vllm":
            assert ttft < 0.5, (name, ttft)
        else:
            assert 0.4 < ttft < 2.5, (name, ttft)


async def test_the_dashboard_compare_view_names_the_definitions_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The compare view's note under the table: each tool's definitions and the warnings, as
    `runs compare` prints them (one core function, Comparison.definition_notes)."""
    from snapshot_apps.frozen import frozen_app
    from textual.widgets import Static

    from dsv4tui.core.campaign.compare import compare_runs
    from dsv4tui.core.store import RunStore

    ids = [str(_import(p, capsys)["run_id"]) for p in (AIPERF_JSON, VLLM_JSON)]
    with RunStore() as store:
        cmp = compare_runs(store, ids)
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.runs.show_compare(cmp)
        await pilot.pause(0.3)
        notes = str(app.screen.query_one("#cmp-notes", Static).render())
        assert f"#{ids[0]} aiperf 0.13.0: TTFT = " in notes
        assert "warning: the columns mix definitions" in notes
