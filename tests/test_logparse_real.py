"""The log parser against real SGLang logs people posted (tests/data/sglang_logs/real: each
file names its source), and bare exception lines as errors in parse-log, the agent's log stream
and a crashed server's status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4tui import main as cli
from dsv4tui.agent.host import logparse
from dsv4tui.core.server import control as server_control

REAL = Path(__file__).parent / "data" / "sglang_logs" / "real"


def summary(name: str) -> dict[str, Any]:
    return logparse.summarize_text((REAL / name).read_text(encoding="utf-8"))


def kinds(s: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in s["errors"]]


def test_every_fixture_names_its_source() -> None:
    logs = sorted(REAL.glob("*.log"))
    assert len(logs) >= 15
    for path in logs:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        assert first.startswith("# source: https://github.com/"), path.name
        logparse.summarize_text(path.read_text(encoding="utf-8"))  # never raises


def test_a_bare_exception_line_is_an_error() -> None:
    s = summary("issue5441_bare_value_error.log")
    assert kinds(s) == ["exception"] and s["phase"] == "failed"
    assert s["errors"][0]["exception"] == "ValueError"
    assert "Glm4ForCausalLM" in s["errors"][0]["text"]
    ev = logparse.parse_line("[2026-03-02 09:15:04 TP0] KeyError: 'model.layers.0.weight'")
    assert ev is not None and ev["kind"] == "exception" and ev["exception"] == "KeyError"
    assert ev["message"] == "'model.layers.0.weight'" and ev["prefix"] == "TP0"


def test_a_named_failure_on_a_bare_line_keeps_its_name_and_says_the_exception() -> None:
    s = summary("issue748_bare_no_kernel_image.log")
    assert kinds(s) == ["no_kernel_image", "traceback"]
    assert s["errors"][0]["exception"] == "RuntimeError"


def test_a_traceback_captured_without_its_header() -> None:
    """The post starts at a frame: its source lines (``raise RuntimeError(f"NCCL error...``)
    are not errors of their own; the exception line ends it and names the failure."""
    s = summary("issue4289_nccl_midway.log")
    assert kinds(s) == ["traceback", "nccl_error"]
    tb = s["errors"][0]
    assert tb["exception"] == "RuntimeError" and tb["line"] == 2
    assert s["errors"][1]["line"] == 14
    events = logparse.LogParser().feed_all(
        (REAL / "issue4289_nccl_midway.log").read_text().split("\n"))
    assert next(e for e in events if e["kind"] == "traceback")["headerless"] is True


def test_an_unindented_traceback_stays_one_traceback() -> None:
    s = summary("issue3460_unindented_traceback.log")
    # 0.4.x wrote "child proces." (sic)
    assert kinds(s) == ["child_failed", "child_failed", "traceback"]
    assert s["lines"] == 16


def test_warmup_failure_with_an_assertion() -> None:
    s = summary("issue16855_warmup_assertion.log")
    assert kinds(s) == ["warmup_failed", "traceback"]  # the exception line is the traceback's
    assert s["errors"][1]["exception"] == "AssertionError"
    assert logparse.root_cause(logparse.LogParser().feed_all(
        (REAL / "issue16855_warmup_assertion.log").read_text().split("\n"))).startswith(
            "[2026-01-10 13:23:27] Initialization failed. warmup error")
    assert s["prefill"][0]["new_token"] == 2163
    assert kinds(summary("issue2193_vllm_style_lines_warmup.log")) == ["warmup_failed",
                                                                       "traceback"]


@pytest.mark.parametrize("name", ["issue4127_benign_error_words.log", "issue8974_nccl_info.log",
                                  "pr11830_startup_tail.log", "pr17392_dp_tp_ep_capture.log",
                                  "antgroup_pr4_logging_config.log",
                                  "ktransformers1870_kv_k_v_sizes.log",
                                  "issue2418_serving_old_format.log", "issue744_gpu_id_prefix.log",
                                  "sglang_jax_pr564_decode.log"])
def test_lines_that_say_error_or_nccl_are_not_errors(name: str) -> None:
    assert summary(name)["errors"] == []


def test_an_ignored_import_error_is_not_an_error_but_the_traceback_is() -> None:
    s = summary("issue4253_import_error_ignored.log")
    assert kinds(s) == ["traceback"] and s["errors"][0]["prefix"] == "TP1"
    s = summary("issue6027_dp_worker_exception.log")  # "TpModelWorkerClient hit an exception"
    assert kinds(s) == ["traceback"] and s["errors"][0]["prefix"] == "DP4 TP4"


def test_startup_forms_of_other_versions() -> None:
    s = summary("pr11830_startup_tail.log")
    assert s["http"] == {"url": "http://127.0.0.1:30000", "port": 30000}
    assert s["limits"]["max_running_requests"] == 4096
    assert [p["name"] for p in s["phases"]] == ["cuda_graph", "http_up"]
    assert s["phases"][0]["duration_s"] == 5.92  # "Time elapsed: 5.92 s"
    old = summary("issue744_gpu_id_prefix.log")  # "[gpu_id=0]" prefixes
    assert old["limits"]["max_total_num_tokens"] == 328021
    assert [p["name"] for p in old["phases"]] == ["load_weights", "kv_cache"]
    kv = logparse.LogParser().feed_all(
        (REAL / "ktransformers1870_kv_k_v_sizes.log").read_text().split("\n"))
    cache = next(e for e in kv if e["kind"] == "kv_cache")
    assert cache["tokens"] == 580364 and cache["size_gb"] == pytest.approx(8.3)
    assert next(e for e in kv if e["kind"] == "load_weights_end")["elapsed_s"] == 653.47


def test_capture_progress_and_prefixes() -> None:
    events = logparse.LogParser().feed_all(
        (REAL / "pr17392_dp_tp_ep_capture.log").read_text().split("\n"))
    begin = next(e for e in events if e["kind"] == "cuda_graph_begin")
    assert begin["prefix"] == "DP3 TP3 EP3"
    progress = [e["percent"] for e in events if e["kind"] == "cuda_graph_progress"]
    assert progress[0] == 0 and progress[-1] == 100


def test_decode_lines_of_other_formats() -> None:
    s = summary("antgroup_pr4_logging_config.log")  # a logging config's own line format
    first = s["decode"][0]
    assert first["prefix"] == "DP15 TP15 EP15" and first["time"] == "2025-10-29 02:27:35"
    assert (first["running_req"], first["queue_req"], first["gen_throughput"]) == (48, 13, 740.64)
    assert first["accept_len"] == 1.91 and first["token_usage"] == 0.76
    jax = summary("sglang_jax_pr564_decode.log")
    assert [d["gen_throughput"] for d in jax["decode"]] == [84.39, 84.23, 84.41]
    old = summary("issue2418_serving_old_format.log")
    assert old["prefill"][0]["new_seq"] == 1 and old["http"]["port"] == 8008


def test_parse_log_cli_reports_a_bare_exception(capsys: pytest.CaptureFixture[str]) -> None:
    path = REAL / "issue5441_bare_value_error.log"
    assert cli.main(["parse-log", str(path)]) == 1  # the log says the server failed
    out = capsys.readouterr().out
    assert "FAILED before ready (last phase: failed)" in out and "errors: 1" in out
    assert "line 2: exception: ValueError: Model architectures" in out


@pytest.mark.e2e
def test_the_log_stream_and_a_crash_report_see_a_bare_exception(tmp_path: Path) -> None:
    """What the dashboard gets: the agent's ``logs`` stream (a real agent process) emits it as
    an error event, a startup step says it; a crashed server's status names it as the cause."""
    log = tmp_path / "server.log"
    log.write_text("[2026-03-02 09:14:01] server_args=ServerArgs(model_path='/m')\n"
                   "[2026-03-02 09:14:09 TP0] Load weight begin. avail mem=93.61 GB\n"
                   "ValueError: Unsupported architectures: LlavaQwenForCausalLM\n")
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "logs", str(log),
                          "--from-start"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    err = next(e["event"] for e in events if e["type"] == "log_event"
               and e["event"]["kind"] == "exception")
    assert err["exception"] == "ValueError" and err["line"] == 3
    step = server_control.startup_step({"type": "log_event", "event": err})
    assert step is not None and step.kind == "error" and step.name == "exception"
    assert step.text == "ValueError: Unsupported architectures: LlavaQwenForCausalLM"
    from dsv4tui.agent.host import server

    info = server.parse_log(str(log), [])
    assert logparse.root_cause(info["events"]) == step.text
    assert info["parser"].current_phase == "failed"


def crashed_after_ready(tmp_path: Path) -> Path:
    """A real start that became ready (tests/data: DeepSeek-V4 TP8, its SIGTERM cut off), then
    a real scheduler crash while serving (LMCache PR 869), its clock moved after the start's."""
    start = (REAL.parent / "dsv4_nvfp4_marlin_tp8.log").read_text().split("\n")
    start = [line for line in start if line and "SIGTERM" not in line
             and "Gracefully exiting" not in line]
    crash = (REAL / "lmcache_pr869_scheduler_crash_in_decode.log").read_text().split("\n")[1:]
    path = tmp_path / "made-up.log"
    path.write_text("\n".join(start + [c.replace("2025-06-26 02:16:20", "2026-03-02 09:19:29")
                                        for c in crash]))
    return path


def test_a_crash_after_ready_is_the_headline_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``made-up.log: ready, startup 98.00 s``, exit 0, the crash only as
    "errors: 1". A scheduler that hit an exception while serving ended the server."""
    path = crashed_after_ready(tmp_path)
    line = next(i for i, text in enumerate(path.read_text().split("\n"), 1)
                if "Scheduler hit an exception" in text)
    assert cli.main(["parse-log", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{path}: CRASHED after ready (line {line}, 230.00 s after ready): "
                      "traceback: ValueError: Failed to allocate token prealloc indices")
    assert out[1] == ("  it had become ready: startup 98.00 s (log timestamps: first line -> "
                      "ready)")
    assert cli.main(["parse-log", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["state"] == "crashed" and data["ready"] is True
    assert data["crash"] == {"kind": "traceback", "line": line, "exception": "ValueError",
                             "text": "ValueError: Failed to allocate token prealloc indices",
                             "prefix": "TP0", "after_ready_s": 230.0}
    # the excerpt alone (no ready in it): a failure, not a crash after ready
    alone = logparse.summarize_text(
        (REAL / "lmcache_pr869_scheduler_crash_in_decode.log").read_text())
    assert alone["state"] == "failed" and alone["crash"] is None


@pytest.mark.parametrize("tail,state", [
    ("[2026-03-02 09:19:29 TP3] Scheduler hit an exception: RuntimeError: CUDA error", "crashed"),
    ("[2026-03-02 09:19:29] Received sigquit from a child process. It usually means the child "
     "failed.", "crashed"),
    # a request's traceback (the server keeps serving) is an error, not a crash
    ("[2026-03-02 09:19:29] Exception in ASGI application\nTraceback (most recent call last):\n"
     '  File "/x.py", line 1, in f\nKeyError: \'messages\'', "ready"),
    # a crash while draining after a SIGTERM is the stop, not a crash
    ("[2026-03-02 09:19:29] SIGTERM received. signum=15 frame=None. Draining requests and "
     "shutting down...\n[2026-03-02 09:19:30] Received sigquit from a child process.", "stopped"),
])
def test_which_errors_after_ready_are_a_crash(tmp_path: Path, tail: str, state: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    start = [line for line in (REAL.parent / "dsv4_nvfp4_marlin_tp8.log").read_text()
             .split("\n") if line and "SIGTERM" not in line and "Gracefully" not in line]
    s = logparse.summarize_text("\n".join(start) + "\n" + tail + "\n")
    assert s["state"] == state and s["ready"] is True
    assert (s["crash"] is not None) == (state == "crashed")
    path = tmp_path / "x.log"
    path.write_text("\n".join(start) + "\n" + tail + "\n")
    assert cli.main(["parse-log", str(path)]) == (1 if state == "crashed" else 0)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{path}: CRASHED after ready") == (state == "crashed"), first
