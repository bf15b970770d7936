"""Run guidellm (the peer) against the known-timing server, for bench_accuracy.py.

guidellm is pip-installed into its own venv (default /tmp/dsv4tui-peer-guidellm, or
$DSV4TUI_PEER_VENV); it needs a tokenizer for its synthetic prompts, so a small word-level
tokenizer is built locally (no model hub). When the install fails (offline), it says why and
the benchmark goes on without the peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

VENV = Path(os.environ.get("DSV4TUI_PEER_VENV", "/tmp/dsv4tui-peer-guidellm"))
TOKENIZER = VENV / "tokenizer"

_MAKE_TOKENIZER = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ("the of and to in is it you that he was for on are as with his they at be this from "
         "have or by one had not but what all were when we there can an your which their said "
         "tok hi").split()
vocab = {"[UNK]": 0}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[UNK]"
                        ).save_pretrained(sys.argv[1])
"""


def ensure_guidellm() -> Path | None:
    """The venv's guidellm executable, installing it if needed; None (and why) if impossible."""
    exe = VENV / "bin" / "guidellm"
    if not exe.exists():
        print(f"installing guidellm into {VENV} (once) ...", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "guidellm"], check=True,
                           timeout=1800)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            print(f"peer skipped: cannot pip-install guidellm ({exc}); offline?")
            return None
    if not (TOKENIZER / "tokenizer.json").exists():
        out = subprocess.run([str(VENV / "bin" / "python"), "-c", _MAKE_TOKENIZER, str(TOKENIZER)],
                             capture_output=True, text=True)
        if out.returncode:
            print(f"peer skipped: cannot build a local tokenizer: {out.stderr.strip()[-300:]}")
            return None
    return exe


def guidellm_level(exe: Path, url: str, c: int, n: int, input_len: int, output_len: int) -> dict:
    report = VENV / f"report-{c}.json"
    report.unlink(missing_ok=True)
    cpu0 = os.times()
    t0 = time.perf_counter()
    out = subprocess.run(
        [str(exe), "run", "--backend", f"kind=openai_http,target={url},model=known-timing",
         "--profile", f"kind=concurrent,streams={c}", "--constraint", f"kind=max_requests,count={n}",
         "--data", f"kind=synthetic_text,prompt_tokens={input_len},output_tokens={output_len}",
         "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER}",
         "--output", f"kind=json,path={report}", "--disable-progress", "--disable-console"],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=900)
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    if out.returncode or not report.exists():
        raise RuntimeError(f"guidellm failed: {(out.stderr or out.stdout).strip()[-400:]}")
    m = json.loads(report.read_text())["benchmarks"][0]["metrics"]
    tokens = m["output_token_count"]["successful"]["total_sum"]
    child_cpu = (cpu1.children_user + cpu1.children_system) - (cpu0.children_user + cpu0.children_system)
    return {"ttft_ms": m["time_to_first_token_ms"]["successful"]["mean"],
            "itl_ms": m["inter_token_latency_ms"]["successful"]["mean"],
            "tok_s": m["output_tokens_per_second"]["successful"]["mean"],
            "errors": m["request_totals"].get("errored", 0),
            "cpu_us_tok": child_cpu * 1e6 / tokens if tokens else float("nan"), "wall_s": wall}


def peer_run(url: str, levels: list[int], rounds: int, server_call: Callable[[str, str], dict],
             input_len: int, output_len: int) -> list[dict]:
    """One guidellm level per C; each result dict as bench_accuracy.measure makes them."""
    exe = ensure_guidellm()
    if exe is None:
        return []
    results = []
    for c in levels:
        n = max(8, c * rounds)
        server_call(url, "/stats/reset")
        try:
            got = guidellm_level(exe, url, c, n, input_len, output_len)
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as exc:
            print(f"peer C={c}: {exc}")
            continue
        results.append({"client": "guidellm", "c": c, "n": n, "got": got,
                        "truth": server_call(url, "/stats")})
    return results
