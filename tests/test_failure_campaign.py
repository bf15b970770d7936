"""A campaign with ``on_failure = "retry-suggested"`` (host ``local``, the simulator, a
detached runner): a variant whose start fails is tried once more with the suggested move,
and both attempts are recorded (the journal, the run store's launches)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, free_port, sim_profile

from dsv4tui.core.store import RunStore
from dsv4tui.main import main

pytestmark = pytest.mark.e2e
SWEEP = '{ levels = [[1, 2]], output_len = 8, input_len = 8, warmup = 0 }'


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def write_config(port: int, *variants: str) -> None:
    prof = sim_profile(port)
    fields = prof.model_dump(exclude_defaults=True)
    fields["model_path"] = prof.model_path
    body = "\n".join(f"{k} = {json.dumps(v) if not isinstance(v, dict) else _table(v)}"
                     for k, v in fields.items())
    text = (f"[hosts.local.profiles.sim]\n{body}\n[hosts.local]\ndefault_profile = \"sim\"\n"
            f'[campaigns.why]\nhost = "local"\nsweep = {SWEEP}\non_failure = "retry-suggested"\n')
    for v in variants:
        text += f"[[campaigns.why.variants]]\n{v}\n"
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(text)


def _table(d: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(x)}" for k, x in d.items()) + " }"


def test_retry_suggested_tries_the_next_move_once_and_records_both(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    extra = sim_profile(port).extra_args
    write_config(port,
                 f'name = "graph_oom"\nextra_args = {json.dumps([*extra, "--sim-fault", "graph-oom:32"])}',
                 f'name = "warmup"\nextra_args = {json.dumps([*extra, "--sim-fault", "fail-startup"])}')
    code = main(["campaign", "start", "why", "--json"])
    got = capsys.readouterr()
    assert got.out, got.err
    out = json.loads(got.out)
    assert "retrying once with --cuda-graph-max-bs-decode 64 -> 32" in got.err
    assert "no flag to change for this cause: not retried" in got.err
    states = {v["name"]: v["state"] for v in out["variants"]}
    assert code == 1 and states == {"graph_oom": "done", "warmup": "failed"}, out
    with RunStore() as store:
        launches = list(reversed(store.launches("local")))
    assert [la.ok for la in launches] == [False, True, False]  # the warm-up: no flag to change
    retry = launches[1]
    assert retry.changes["--cuda-graph-max-bs-decode"] == {"from": "64", "to": "32"}
    assert "--cuda-graph-max-bs-decode" not in launches[0].changes
    phases = [p["name"] for p in (retry.profile or {}).get("phases") or []]
    assert phases == ["load_weights", "kv_cache", "cuda_graph", "http_up", "ready"]
    html = Path(out["report"]).read_text()  # startup per phase, a column group of the report
    assert "<h2>Startup per phase</h2>" in html and "CUDA graphs s" in html
