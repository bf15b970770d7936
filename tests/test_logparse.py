"""SGLang log parsing on captured-format excerpts (tests/data/sglang_logs) and single lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4tui import main as cli
from dsv4tui.agent.host import logparse
from dsv4tui.agent.host.logs import ParsedTail

DATA = Path(__file__).parent / "data" / "sglang_logs"


def summary(name: str) -> dict:
    return logparse.summarize_text((DATA / name).read_bytes().decode())


LINES = [
    ("[2026-03-02 09:14:13 TP3] Load weight begin. avail mem=93.61 GB",
     {"kind": "load_weights_begin", "avail_mem_gb": 93.61, "prefix": "TP3"}),
    ("Loading safetensors checkpoint shards:  45% Completed | 34/76 [00:22<00:27,  1.52it/s]",
     {"kind": "load_weights_progress", "percent": 45, "done": 34, "total": 76}),
    ("[2026-03-02 09:15:04 TP0] Load weight end. elapsed=51.37 s, type=DeepseekV4ForCausalLM, "
     "avail mem=73.02 GB, mem usage=20.59 GB.",
     {"kind": "load_weights_end", "elapsed_s": 51.37, "mem_usage_gb": 20.59,
      "type": "DeepseekV4ForCausalLM"}),
    ("[2026-03-02 09:15:06 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: "
     "1245184, KV size: 58.44 GB",
     {"kind": "kv_cache", "tokens": 1245184, "size_gb": 58.44, "dtype": "torch.float8_e4m3fn"}),
    ("[2026-03-02 09:15:06 TP0] Memory pool end. avail mem=11.83 GB",
     {"kind": "memory_pool_end", "avail_mem_gb": 11.83}),
    ("[2026-03-02 09:15:07 TP0] Capture target decode CUDA graph begin. backend=full, "
     "num_tokens_per_req=1, bs=[1, 2, 4], avail mem=11.61 GB",
     {"kind": "cuda_graph_begin", "stage": "target decode", "backend": "full"}),
    ("[2026-03-02 09:15:32 TP0] Capture target decode CUDA graph end. elapsed=24.71 s, "
     "mem usage=0.66 GB, avail mem=10.95 GB.",
     {"kind": "cuda_graph_end", "stage": "target decode", "elapsed_s": 24.71}),
    ("[2025-09-12 18:03:27 TP0] Capture cuda graph begin. This can take up to several minutes.",
     {"kind": "cuda_graph_begin", "stage": None}),
    ("[2025-09-12 18:03:46 TP0] Capture cuda graph end. Time elapsed: 19.02 s. mem usage=0.93 GB.",
     {"kind": "cuda_graph_end", "stage": None, "elapsed_s": 19.02}),
    ("[2026-03-02 09:15:33 TP0] max_total_num_tokens=1245184, chunked_prefill_size=8192, "
     "max_prefill_tokens=16384, max_running_requests=256, context_len=1048576, "
     "available_gpu_mem=10.95 GB",
     {"kind": "server_limits", "max_running_requests": 256.0, "context_len": 1048576.0}),
    ("[2026-03-02 09:15:34] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
     {"kind": "http_up", "port": 30000, "host": "0.0.0.0"}),
    ("[2026-03-02 09:15:39] The server is fired up and ready to roll!", {"kind": "ready"}),
    ("[2026-03-02 13:01:31] Initialization failed. warmup error: timed out",
     {"kind": "warmup_failed", "message": "timed out"}),
    ("[2026-03-02 09:16:38 TP0] Decode batch, #running-req: 16, #full token: 2688, full token "
     "usage: 0.01, #swa token: 2688, swa token usage: 0.02, cuda graph: True, gen throughput "
     "(token/s): 28.71, #queue-req: 2, ",
     {"kind": "decode", "running_req": 16, "queue_req": 2, "gen_throughput": 28.71,
      "full_token": 2688, "swa_token": 2688, "full_token_usage": 0.01, "swa_token_usage": 0.02,
      "token_usage": 0.02, "cuda_graph": True}),
    ("[2025-09-12 18:05:14 DP1 TP2 EP2] Decode batch, #running-req: 6, #token: 4133, token "
     "usage: 0.01, accept len: 2.41, accept rate: 0.60, cuda graph: True, gen throughput "
     "(token/s): 231.07, #queue-req: 0, ",
     {"kind": "decode", "running_req": 6, "token": 4133, "token_usage": 0.01, "accept_len": 2.41,
      "accept_rate": 0.6, "gen_throughput": 231.07, "prefix": "DP1 TP2 EP2"}),
    ("[2025-09-12 18:05:10 DP0 TP0 EP0] Prefill batch, #new-seq: 4, #new-token: 512, "
     "#cached-token: 128, token usage: 0.01, #running-req: 2, #queue-req: 1, ",
     {"kind": "prefill", "new_seq": 4, "new_token": 512, "cached_token": 128, "running_req": 2,
      "queue_req": 1, "token_usage": 0.01}),
    ("[2026-03-02 09:16:10 TP0] Prefill batch, #new-seq: 16, #new-token: 2048, #cached-token: 0, "
     "full token usage: 0.00, swa token usage: 0.01, #running-req: 0, #queue-req: 0, ",
     {"kind": "prefill", "new_seq": 16, "swa_token_usage": 0.01, "token_usage": 0.01}),
    ("[2026-03-02 09:18:20] SIGTERM received. signum=15 frame=None. Draining requests and "
     "shutting down...", {"kind": "sigterm"}),
    ("[2026-03-02 09:18:25] Gracefully exiting... Remaining number of requests 3",
     {"kind": "graceful_exit", "remaining": 3}),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.31 GiB.", {"kind": "oom"}),
    ("ncclUnhandledCudaError: Call to CUDA function failed.", {"kind": "nccl_error"}),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device",
     {"kind": "no_kernel_image"}),
]


@pytest.mark.parametrize(("line", "expect"), LINES, ids=[e["kind"] for _, e in LINES])
def test_each_line_form(line: str, expect: dict) -> None:
    ev = logparse.parse_line(line)
    assert ev is not None
    for key, value in expect.items():
        assert ev[key] == value, (key, ev)


def test_ordinary_lines_are_not_events() -> None:
    assert logparse.parse_line("[2026-03-02 09:15:35] INFO:     127.0.0.1:51 - \"GET /health "
                               "HTTP/1.1\" 200 OK") is None
    assert logparse.parse_line("") is None
    assert logparse.split_prefix("[2026-03-02 09:15:35 DP0 TP3 EP3] hi") == (
        "2026-03-02 09:15:35", "DP0 TP3 EP3", "hi")
    assert logparse.ranks("DP0 TP3 EP3") == {"DP": 0, "TP": 3, "EP": 3}


def test_full_dsv4_startup() -> None:
    s = summary("dsv4_nvfp4_marlin_tp8.log")
    assert s["ready"] is True
    assert s["startup_s"] == 98.0  # 09:14:01 -> 09:15:39
    assert [p["name"] for p in s["phases"]] == ["load_weights", "kv_cache", "cuda_graph",
                                                "http_up", "ready"]
    assert s["phases"][0]["duration_s"] == 51.37  # SGLang's own elapsed=
    assert s["phases"][2]["duration_s"] == 24.71
    assert s["errors"] == []
    assert [d["gen_throughput"] for d in s["decode"]] == [28.71, 28.66]
    assert s["decode"][0]["swa_token"] == 2688 and s["decode"][0]["prefix"] == "TP0"
    assert len(s["prefill"]) == 2
    assert [e["kind"] for e in s["stop"]] == ["sigterm", "graceful_exit"]
    assert s["limits"]["max_total_num_tokens"] == 1245184
    assert s["http"] == {"url": "http://127.0.0.1:30000", "port": 30000}
    assert s["lines"] == 70  # tqdm's '\r' repaints stay one line
    json.dumps(s)


def test_old_format_dp_ep_and_speculative_captures() -> None:
    s = summary("old_format_dp_ep.log")
    assert s["ready"] and s["startup_s"] == 114.0
    graph = next(p for p in s["phases"] if p["name"] == "cuda_graph")
    assert graph["duration_s"] == pytest.approx(26.9)
    assert [st["stage"] for st in graph["stages"]] == ["decode", "draft"]
    assert s["decode"][0]["prefix"] == "DP1 TP2 EP2"
    assert s["decode"][0]["accept_len"] == 2.41


@pytest.mark.parametrize(("name", "kinds", "phase"), [
    ("oom_kv_cache.log", ["traceback", "oom", "child_failed"], "failed"),
    ("nccl_error.log", ["traceback", "nccl_error", "nccl_error", "child_failed"], "failed"),
    ("no_kernel_image.log", ["traceback", "no_kernel_image", "child_failed"], "failed"),
    ("warmup_failed.log", ["warmup_failed", "traceback"], "failed"),
])
def test_failures(name: str, kinds: list[str], phase: str) -> None:
    s = summary(name)
    assert not s["ready"] and s["startup_s"] is None
    assert [e["kind"] for e in s["errors"]] == kinds
    assert s["phase"] == phase
    tb = next(e for e in s["errors"] if e["kind"] == "traceback")
    assert tb["exception"] and tb["line"] >= 1


def test_traceback_event_carries_lines_and_context() -> None:
    parser = logparse.LogParser()
    events = parser.feed_all((DATA / "oom_kv_cache.log").read_text().split("\n"))
    tb = next(e for e in events if e["kind"] == "traceback")
    assert tb["exception"] == "torch.OutOfMemoryError"
    assert tb["context"] == "Scheduler hit an exception"
    assert tb["prefix"] == "TP3"
    assert any("init_memory_pool" in line for line in tb["lines"])
    assert logparse.error_lines(events)[-1].startswith("[2026-03-02 10:02:00] Received sigquit")


def test_current_phase_follows_the_log() -> None:
    parser = logparse.LogParser()
    seen = []
    for line in (DATA / "dsv4_nvfp4_marlin_tp8.log").read_bytes().decode().split("\n"):
        parser.feed(line)
        if not seen or seen[-1] != parser.current_phase:
            seen.append(parser.current_phase)
    assert seen == ["init", "load_weights", "kv_cache", "cuda_graph", "http_up", "warmup",
                    "ready", "draining"]


def test_follow_parses_partial_tqdm_and_rotation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"[2026-03-02 09:14:13 TP0] Load weight begin. avail mem=93.61 GB\n"
                    b"Loading safetensors checkpoint shards:   0% Completed | 0/76 [00:00<?, ?it/s]"
                    b"\rLoading safetensors checkpoint shards:  45% Completed | 34/76 [00:22<00:27]")
    tail = ParsedTail(str(log))
    lines, events = tail.poll()
    assert len(lines) == 1  # the tqdm line is unfinished
    # the repaint after the last '\r' may be half written: it waits for the next one
    assert [e.get("percent") for e in events if e["kind"] == "load_weights_progress"] == [0]
    with log.open("ab") as fh:
        fh.write(b"\rLoading safetensors checkpoint shards: 100% Completed | 76/76 [00:50<00:00]\n"
                 b"[2026-03-02 09:15:04 TP0] Load weight end. elapsed=51.37 s, type=X, "
                 b"avail mem=73.02 GB, mem usage=20.59 GB.\n")
    lines, events = tail.poll()
    assert len(lines) == 2
    kinds = [(e["kind"], e.get("percent")) for e in events]
    assert kinds == [("load_weights_progress", 45), ("load_weights_progress", 100),
                     ("load_weights_end", None), ("phase", None)]
    log.rename(tmp_path / "server.log.1")  # a new launch rotates the log
    log.write_text("[2026-03-02 10:00:00] The server is fired up and ready to roll!\n")
    lines, events = tail.poll()
    assert tail.tail.rotated
    assert lines == ["[2026-03-02 10:00:00] The server is fired up and ready to roll!"]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_parse_log_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "parse-log", str(DATA / "dsv4_nvfp4_marlin_tp8.log"), "--json")
    assert code == 0
    data = json.loads(out)
    assert {"ready", "startup_s", "phases", "errors", "decode", "prefill"} <= set(data)
    assert data["phases"][0] == {"name": "load_weights", "duration_s": 51.37}
    assert set(data["decode"][0]) >= {"time", "running_req", "queue_req", "gen_throughput"}
    code, out, _ = run_cli(capsys, "parse-log", str(DATA / "no_kernel_image.log"))
    assert code == 1 and "no_kernel_image" in out and "FAILED before ready" in out


@pytest.mark.parametrize("bad", ["missing", "dir", "binary"])
def test_parse_log_bad_input(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = {"missing": tmp_path / "nope.log", "dir": tmp_path}.get(bad, tmp_path / "x.bin")
    if bad == "binary":
        path.write_bytes(b"\x00\x01\x02" * 100)
    code, out, err = run_cli(capsys, "parse-log", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.e2e
def test_a_lines_class_comes_from_the_agent_end_to_end(tmp_path: Path) -> None:
    """The real agent (`logs FILE`, a subprocess) classifies each line as it reads it; the
    console's ring keeps the class it was given (a traceback block, a WARNING, a TP rank)."""

    import subprocess
    import sys

    from dsv4tui.core.view import model as m
    from dsv4tui.core.view.log_lines import ERROR, INFO, WARNING
    from dsv4tui.core.view.streams import LogFeed

    log = tmp_path / "server.log"
    log.write_text("[2025-11-30 12:00:00 TP3] Load weight begin. avail mem=70.00 GB\n"
                   "[2025-11-30 12:00:01 TP1] WARNING: something is deprecated\n"
                   "Traceback (most recent call last):\n"
                   '  File "x.py", line 1, in <module>\n'
                   "RuntimeError: boom\n"
                   "[2025-11-30 12:00:02 TP0] fine again\n")
    proc = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "logs", str(log),
                           "--from-start"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(x) for x in proc.stdout.splitlines()]
    [batch] = [e for e in events if e["type"] == "lines"]
    assert batch["levels"] == [INFO, WARNING, ERROR, ERROR, ERROR, INFO]
    assert batch["tps"] == [3, 1, None, None, None, 0]
    model = m.UiModel()
    batch["levels"][5] = WARNING  # what the agent says is what the ring keeps
    LogFeed().add(model, batch)
    got = [model.logs.get(i) for i in range(model.logs.first, model.logs.next)]
    assert [(g.level, g.tp) for g in got if g] == [(INFO, 3), (WARNING, 1), (ERROR, None),
                                                   (ERROR, None), (ERROR, None), (WARNING, 0)]
    assert model.logs.ranks == {0, 1, 3} and model.logs.errors == 3
