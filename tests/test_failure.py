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
    got = failure.classify(events, parser)
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
    graph = failure.classify(*reversed(parse(LOGS / "oom_cuda_graph.log")))
    assert graph is not None and graph["evidence"]["graph_max_bs"] == 256
    prefill = failure.classify(*reversed(parse(LOGS / "oom_prefill.log")))
    assert prefill is not None and prefill["evidence"]["chunked_prefill_size"] == 16384
    dist = failure.classify(*reversed(parse(LOGS / "dist_timeout.log")))
    assert dist is not None and dist["evidence"]["timeout_s"] == 600


def test_a_kill_or_an_exit_the_log_does_not_explain() -> None:
    parser = logparse.LogParser()
    events = parser.feed_all(["[2026-03-02 10:01:10 TP0] Load weight begin. avail mem=93.61 GB"])
    killed = failure.classify(events, parser, signal=9)
    assert killed is not None and killed["class"] == "killed"
    assert killed["cause"].startswith("killed by SIGKILL") and "load_weights" in killed["cause"]
    exited = failure.classify(events, parser, exit_code=3)
    assert exited is not None and exited["class"] == "exited" and "code 3" in exited["cause"]
    assert failure.classify(events, parser) is None
    # an error in the log says more than the signal SGLang's launcher killed itself with
    _, oom = parse(LOGS / "oom_kv_cache.log")
    got = failure.classify(oom, None, signal=9)
    assert got is not None and got["class"] == "oom_kv_cache"
