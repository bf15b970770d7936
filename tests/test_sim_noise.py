"""The simulator's known truths for verdicts: a run-to-run speed factor per server process
(--sim-run-noise, --sim-seed) and a subtly wrong backend (--sim-wrong-rate: canary answers off
by one). Real simulators on loopback."""

from __future__ import annotations

import random
import subprocess
import sys

import httpx
from plugins.sim import SimProcess, sims, start_sim  # noqa: F401  (fixture)

from dsv4tui.agent.bench import canary
from dsv4tui.sim.speed import run_factor


def _ask(sim: SimProcess, prompt: str) -> str:
    r = httpx.post(f"{sim.url}/v1/chat/completions", timeout=30, json={
        "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 16})
    r.raise_for_status()
    return str(r.json()["choices"][0]["message"]["content"])


def test_run_noise_and_wrong_rate_on_a_real_simulator(tmp_path, sims):  # noqa: F811
    noisy = start_sim(tmp_path / "a", "--sim-run-noise", "10", "--sim-seed", "3",
                      "--sim-wrong-rate", "0.1")
    plain = start_sim(tmp_path / "b")
    sims += [noisy, plain]
    noisy.wait_ready()
    plain.wait_ready()
    info = httpx.get(f"{noisy.url}/get_server_info", timeout=10).json()["simulated"]
    want = run_factor(10.0, random.Random(3))
    assert want != 1.0
    assert info["run_factor"] == round(want, 4) and info["wrong_rate"] == 0.1
    assert httpx.get(f"{plain.url}/get_server_info", timeout=10).json()[
        "simulated"]["run_factor"] == 1.0
    items = canary.builtin_items()
    wrong = right = 0
    for item in items:
        got = _ask(noisy, item["prompt"])
        if canary.correct(item, got):
            right += 1
        else:
            wrong += 1
            assert int(got) == int(item["answer"]) + 1  # off by one, not garbage
        assert canary.correct(item, _ask(plain, item["prompt"]))
    assert 5 <= wrong <= 16 and right + wrong == len(items)
    # the same prompts are wrong every time (temperature 0)
    again = sum(not canary.correct(x, _ask(noisy, x["prompt"])) for x in items)
    assert again == wrong
    # the 17x23 gate still answers: the canary, not the gate, is what catches this backend
    assert _ask(noisy, "What is 17*23? Number only.").strip() == "391"


def test_bad_noise_flags_exit_2():
    for flags, needle in ((["--sim-wrong-rate", "1.5"], "between 0 and 1"),
                          (["--sim-run-noise", "-3"], ">= 0")):
        p = subprocess.run([sys.executable, "-m", "dsv4tui.sim.sglang", "--model-path", "m",
                            *flags], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr


def test_builtin_canary_is_fixed_and_scored_exactly(tmp_path):
    a, b = canary.builtin_items(), canary.builtin_items()
    assert a == b and len(a) == 100 and len({x["prompt"] for x in a}) == 100
    item = {"answer": "1234"}
    assert canary.correct(item, "The answer is 1,234.")
    assert not canary.correct(item, "1235") and not canary.correct(item, "no number")
    assert canary.correct({"answer_regex": r"\bParis\b"}, "It is Paris.")
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "2+2?", "answer": 4}\n\n{"prompt": "Capital?", '
                 '"answer_regex": "Paris"}\n')
    assert [x.get("answer") for x in canary.load_items(str(f))] == ["4", None]
    f.write_text('{"prompt": "2+2?"}\n')
    try:
        canary.load_items(str(f))
    except ValueError as exc:
        assert "line 1" in str(exc) and "answer" in str(exc)
    else:
        raise AssertionError("no error")
