"""Why a start failed: every failing log in tests/data/sglang_logs (real and realistic) gets
its class, its phase and a one-line cause (agent/host/failure.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4tui.agent.host import failure, logparse

LOGS = Path(__file__).parent / "data" / "sglang_logs"

# log -> (class, the phase it failed in, words the cause line says)
EXPECTED = {
    "oom_cuda_graph.log": ("oom_cuda_graph", "cuda_graph", "batch sizes up to 256"),
    "oom_weights.log": ("oom_weights", "load_weights", "loading the weights"),
    "oom_kv_cache.log": ("oom_kv_cache", "kv_cache", "KV cache"),
    "oom_prefill.log": ("oom_prefill", "warmup", "prefill"),
    "dist_timeout.log": ("dist_timeout", "init", "after 600 s (1 of 2 joined)"),
    "nccl_error.log": ("nccl_error", "init", "NCCL"),
    "no_kernel_image.log": ("no_kernel_image", "cuda_graph", "no kernel image"),
    "warmup_failed.log": ("warmup_failed", "warmup", "requests.exceptions.ReadTimeout"),
    "real/issue16855_warmup_assertion.log": ("warmup_failed", "warmup", "AssertionError"),
    "real/issue2193_vllm_style_lines_warmup.log": ("warmup_failed", "warmup", "warm-up"),
    "real/issue3460_unindented_traceback.log": ("nccl_error", "init", "distributed init"),
    "real/issue4253_import_error_ignored.log": ("python_exception", "init",
                                                "no exception line"),
    "real/issue4289_nccl_midway.log": ("nccl_error", "init", "NCCL"),
    "real/issue5441_bare_value_error.log": ("python_exception", "init",
                                            "ValueError: Model architectures"),
    "real/issue6027_dp_worker_exception.log": ("python_exception", "init",
                                               "last frame: forward_batch_generation"),
    "real/issue748_bare_no_kernel_image.log": ("no_kernel_image", "init", "no kernel image"),
    "real/lmcache_pr869_scheduler_crash_in_decode.log": (
        "python_exception", "serving", "ValueError: Failed to allocate token prealloc"),
}


def parse(path: Path) -> tuple[logparse.LogParser, list[logparse.Event]]:
    parser = logparse.LogParser()
    events = parser.feed_all(path.read_text(encoding="utf-8").split("\n"))
    return parser, events + parser.close()


def all_logs() -> list[str]:
    return sorted(str(p.relative_to(LOGS)) for p in LOGS.rglob("*.log"))


@pytest.mark.parametrize("name", all_logs())
def test_every_failing_log_is_classified_and_no_healthy_one_is(name: str) -> None:
    parser, events = parse(LOGS / name)
    got = failure.diagnose(events, parser)
    state = logparse.summarize_text((LOGS / name).read_text(encoding="utf-8"))["state"]
    if name not in EXPECTED:
        assert state not in ("failed", "crashed") and got is None, name
        return
    cls, phase, words = EXPECTED[name]
    assert got is not None and got["class"] == cls, got
    assert got["phase"] == phase and words in got["cause"], got["cause"]
    assert got["cause"].startswith(failure.CLASSES[cls].split(" (")[0][:20])
    assert "\n" not in got["cause"]


def test_the_parser_keeps_the_phase_a_start_failed_in() -> None:
    s = logparse.summarize_text((LOGS / "oom_cuda_graph.log").read_text())
    assert s["phase"] == "failed" and s["failed_in"] == "cuda_graph"
    assert logparse.summarize_text((LOGS / "old_format_dp_ep.log").read_text())[
        "failed_in"] is None


def test_the_evidence_a_next_move_needs() -> None:
    graph = failure.diagnose(*reversed(parse(LOGS / "oom_cuda_graph.log")))
    assert graph is not None and graph["evidence"]["graph_max_bs"] == 256
    prefill = failure.diagnose(*reversed(parse(LOGS / "oom_prefill.log")))
    assert prefill is not None and prefill["evidence"]["chunked_prefill_size"] == 16384
    dist = failure.diagnose(*reversed(parse(LOGS / "dist_timeout.log")))
    assert dist is not None and dist["evidence"]["timeout_s"] == 600


def test_a_kill_or_an_exit_the_log_does_not_explain() -> None:
    parser = logparse.LogParser()
    events = parser.feed_all(["[2026-03-02 10:01:10 TP0] Load weight begin. avail mem=93.61 GB"])
    killed = failure.diagnose(events, parser, signal=9)
    assert killed is not None and killed["class"] == "killed"
    assert killed["cause"].startswith("killed by SIGKILL") and "load_weights" in killed["cause"]
    exited = failure.diagnose(events, parser, exit_code=3)
    assert exited is not None and exited["class"] == "exited" and "code 3" in exited["cause"]
    assert failure.diagnose(events, parser) is None
    # an error in the log says more than the signal SGLang's launcher killed itself with
    _, oom = parse(LOGS / "oom_kv_cache.log")
    got = failure.diagnose(oom, None, signal=9)
    assert got is not None and got["class"] == "oom_kv_cache"


# log -> the flag the next move changes, from, to (None: no flag helps, a hint instead)
MOVES = {
    "oom_cuda_graph.log": ("--cuda-graph-max-bs-decode", "256", "128"),
    "oom_kv_cache.log": ("--mem-fraction-static", "0.97", "0.95"),
    "oom_prefill.log": ("--chunked-prefill-size", "16384", "8192"),
    "dist_timeout.log": ("--dist-timeout", "600", "1200"),
    "oom_weights.log": None, "nccl_error.log": None, "warmup_failed.log": None,
    "real/issue5441_bare_value_error.log": None,
}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_each_cause_gets_its_documented_next_move(name: str) -> None:
    from dsv4tui.core.server import next_move

    parser, events = parse(LOGS / name)
    move = next_move.suggest(failure.diagnose(events, parser))
    assert move is not None
    want = MOVES[name]
    if want is None:
        assert not move.runnable and move.command("h200", "dsv4") is None and move.why
        return
    assert (move.flag, move.from_, move.to) == want
    assert move.command("h200", "dsv4") == (
        f"dsv4tui server restart h200 --profile dsv4 --set {want[0][2:]}={want[2]}")


def test_the_move_starts_from_what_ran_and_keeps_the_other_changes() -> None:
    from dsv4tui.core.server import next_move

    parser, events = parse(LOGS / "oom_cuda_graph.log")
    fail = failure.diagnose(events, parser)
    ran = ["python3", "-m", "sglang.launch_server", "--cuda-graph-max-bs-decode", "96"]
    move = next_move.suggest(fail, ran)
    assert move is not None and (move.from_, move.to) == ("96", "48")
    assert "from its argv" in move.why
    assert move.command("h", None, ["cuda-graph-max-bs-decode=96", "dist-timeout=900"],
                        "marlin") == ("dsv4tui server restart h --backend marlin --set "
                                      "dist-timeout=900 --set cuda-graph-max-bs-decode=48")


def test_no_kernel_image_suggests_a_backend_for_the_checkpoint_and_the_gpu() -> None:
    from dsv4tui.core.server import next_move

    parser, events = parse(LOGS / "no_kernel_image.log")
    fail = failure.diagnose(events, parser)
    nvfp4 = {"checkpoint": "NVFP4", "moe_runner_backend": None}
    move = next_move.suggest(fail, [], nvfp4, "12.0")  # the log says what ran
    assert move is not None and move.backend == "triton"
    assert move.from_ == "flashinfer_trtllm_routed" and "on sm_120" in move.why
    assert move.command("h", None) == "dsv4tui server restart h --backend triton"
    fail["evidence"].pop("moe_runner_backend")  # auto on NVFP4: SGLang picks trtllm_routed
    auto = next_move.suggest(fail, [], nvfp4, None)
    assert auto is not None and (auto.from_, auto.backend) == ("auto", "triton")
    # the attention kernels had no image (issue 748, sm_75): no MoE backend to suggest
    parser, events = parse(LOGS / "real/issue748_bare_no_kernel_image.log")
    other = next_move.suggest(failure.diagnose(events, parser), [], nvfp4)
    assert other is not None and not other.runnable and "attention" in other.cause


def test_set_items_become_profile_overrides() -> None:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.errors import UserError
    from dsv4tui.core.server import next_move

    prof = ServerProfile(model_path="/m", extra_args=["--dist-timeout", "300", "--log-level=info"])
    got = next_move.sets_to_overrides(prof, ["mem-fraction-static=0.86", "dist-timeout=600",
                                             "--cuda-graph-max-bs-decode=32"])
    assert got == {"mem_fraction_static": "0.86", "extra_args": [
        "--log-level=info", "--dist-timeout", "600", "--cuda-graph-max-bs-decode", "32"]}
    for bad in ("x", "=1", "Bad_Flag=1", "cuda-graph-max-bs=8", "api-key=s", "a=b\nc"):
        with pytest.raises(UserError):
            next_move.sets_to_overrides(prof, [bad])


def test_startup_per_phase_rows_show_where_a_start_spent_its_time() -> None:
    from dsv4tui.core.campaign import startup_phases

    slow = {"startup_s": 300.0, "phases": [
        {"name": "load_weights", "duration_s": 200.0}, {"name": "kv_cache", "duration_s": 5.0},
        {"name": "cuda_graph", "duration_s": 60.0}, {"name": "cuda_graph", "duration_s": 20.0},
        {"name": "http_up", "duration_s": 2.0}, {"name": "ready", "duration_s": 8.0}]}
    fast = {"startup_s": 100.0, "phases": [{"name": "load_weights", "duration_s": 54.0},
                                            {"name": "cuda_graph", "duration_s": 24.0}]}
    rows = startup_phases.rows([("#1 marlin", slow), ("#2 triton", fast), ("#3 failed", None)])
    assert rows[0] == ["#1 marlin", "200.0", "5.0", "80.0", "2.0", "8.0", "5.0", "300.0",
                       "+0 %"]
    assert rows[1] == ["#2 triton", "54.0", "-", "24.0", "-", "-", "22.0", "100.0", "-67 %"]
    assert rows[2][1:] == ["-"] * 8
    assert startup_phases.rows([("#1", {"startup_s": 5.0})]) == []  # no phases: no table
