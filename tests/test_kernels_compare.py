"""``dsv4tui kernels compare``: where the time moved between two stored captures — the
simulator's MXFP4/triton vs NVFP4/marlin, different batches, the real traces, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.kernels import trace_parse
from dsv4tui.cli import kernels as cmd
from dsv4tui.core.store import RunStore
from dsv4tui.main import main
from dsv4tui.sim.trace import write_trace

TRACES = Path(__file__).parent / "data" / "traces"


def sim_summary(tmp: Path, backend: str, checkpoint: str, tensor: float,
                batch: int = 16) -> dict[str, Any]:
    write_trace(str(tmp), backend, checkpoint, 5, tp_size=2, batch=batch, seed=1)
    s = trace_parse.parse_traces([str(tmp)])
    trace_parse.attribute_tensor_cores(s, tensor, "simulated", 97.0)
    s.update(model="dsv4", load={"concurrency": batch},
             server={"backend": backend, "checkpoint": checkpoint, "simulated": True})
    return s


def store(summary: dict[str, Any], backend: str | None = None, checkpoint: str | None = None,
          run_id: int | None = None) -> int:
    with RunStore() as st:
        ctx = cmd.ServerContext(host="demo", backend=backend, checkpoint=checkpoint,
                                simulated=bool((summary.get("server") or {}).get("simulated")))
        return cmd.store_capture(st, summary, ctx, run_id=run_id)[0]


def demo_pair(tmp: Path, batch_b: int = 16) -> tuple[int, int]:
    a = store(sim_summary(tmp / "a", "triton", "MXFP4", 0.8), "triton", "MXFP4")
    b = store(sim_summary(tmp / "b", "marlin", "NVFP4", 38.0, batch_b), "marlin", "NVFP4")
    return a, b


def test_mxfp4_triton_vs_nvfp4_marlin(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = demo_pair(tmp_path)
    assert main(["kernels", "compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert f"#{a} triton/MXFP4 -> #{b} marlin/NVFP4" in text and "SIMULATED" in text
    moe = next(line for line in text.splitlines() if line.startswith("MoE GEMM"))
    assert "moved to tensor cores" in moe and "ms/token" not in text
    assert "appeared in B: marlin_moe_wna16::Marlin" in text
    assert "vanished from A: _mxfp4_slot_gemv_kernel" in text
    assert main(["kernels", "compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fam = {f["family"]: f for f in out["families"]}
    assert fam["moe_gemm"]["tensor_cores"] == "moved to tensor cores"
    assert fam["moe_gemm"]["a"]["tensor_cores"] is False and fam["moe_gemm"]["b"]["tensor_cores"]
    assert fam["moe_gemm"]["step_ms_change"] < 0 < fam["moe_gemm"]["a"]["step_ms"]
    assert out["a"]["simulated"] and out["b"]["batch"] == 16 and not out["per_token"]
    shares = sum(f["b"]["share"] for f in out["families"])
    assert shares == pytest.approx(1.0, abs=0.01)  # shares of one decode step


def test_different_batches_per_step_and_per_token(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a, b = demo_pair(tmp_path, batch_b=32)
    assert main(["kernels", "compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "different batches (bs 16 vs 32)" in text and "A ms/token" in text
    assert main(["kernels", "compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["per_token"] and out["b"]["batch"] == 32
    moe = next(f for f in out["families"] if f["family"] == "moe_gemm")["b"]
    assert moe["token_ms"] == pytest.approx(moe["step_ms"] / 32)


def test_latest_capture_of_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as st:
        r1 = st.start_run(label="mxfp4", host="demo", backend="triton", simulated=True)
        r2 = st.start_run(label="nvfp4", host="demo", backend="marlin", simulated=True)
    store(sim_summary(tmp_path / "a", "triton", "MXFP4", 0.8), "triton", "MXFP4", run_id=r1)
    b = store(sim_summary(tmp_path / "b", "marlin", "NVFP4", 38.0), "marlin", "NVFP4",
              run_id=r2)
    assert main(["kernels", "compare", "--run", str(r1), "--run", "nvfp4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["a"]["run_id"], out["b"]["run_id"], out["b"]["id"]) == (r1, r2, b)


def test_real_traces(capsys: pytest.CaptureFixture[str]) -> None:
    ids = []
    for name in ("h200_torch_profiler-TP-0.trace.json.gz", "h200_synthetic_steps.trace.json.gz"):
        s = trace_parse.parse_traces([str(TRACES / name)])
        trace_parse.attribute_tensor_cores(s, None, None)
        ids.append(store(s))
    assert main(["kernels", "compare", *map(str, ids), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["a"]["simulated"] and out["families"]
    assert all(f["label"] for f in out["families"])
    assert main(["kernels", "compare", *map(str, ids)]) == 0
    assert "MoE GEMM" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["kernels", "compare", "1"], "give two captures"),
    (["kernels", "compare", "1", "2", "--run", "3"], "give two captures"),
    (["kernels", "compare", "98", "99"], "no kernel capture with id 98"),
    (["kernels", "compare", "--run", "5", "--run", "6"], "no run with id 5"),
    (["kernels", "a", "b"], "one HOST"),
    (["kernels", "demo", "--run", "1", "--run", "2"], "--run once"),
])
def test_errors_are_one_line(argv: list[str], msg: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_capture_without_a_parsed_trace(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = demo_pair(tmp_path)
    empty = store({"model": "dsv4", "families": [], "kernels": []})
    assert main(["kernels", "compare", str(a), str(empty)]) != 0
    err = capsys.readouterr().err
    assert f"#{empty} has no parsed trace" in err and len(err.strip().splitlines()) == 1


def test_report_shows_families_next_to_tok_s_and_roofline(tmp_path: Path) -> None:
    from test_report import seed_run

    from dsv4tui.core.campaign import report

    with RunStore() as st:
        ra = seed_run(st, "MXFP4_triton", "triton", 40.0)
        rb = seed_run(st, "NVFP4_marlin", "marlin", 30.0)
        with st.transaction() as db:  # the roofline's inputs: 8 H200s, 13B active at 0.5 B
            db.execute("UPDATE runs SET profile_json = ? WHERE id = ?",
                       ('{"tp_size": 8, "active_params_b": 13, "bytes_per_param": 0.5}', rb))
    store(sim_summary(tmp_path / "a", "triton", "MXFP4", 0.8), "triton", "MXFP4", run_id=ra)
    store(sim_summary(tmp_path / "b", "marlin", "NVFP4", 38.0), "marlin", "NVFP4", run_id=rb)
    with RunStore() as st:
        rep = report.build(st, [ra, rb])
    md, _ = report.to_markdown(rep, "r")
    table = md.split("## Kernel families per variant", 1)[1].split("##", 1)[0]
    head, _, *rows = [x for x in table.splitlines() if x.startswith("|")]
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert cols[:4] == ["variant", "capture", "tok/s", "roofline"] and "MoE GEMM" in cols
    cells = [dict(zip(cols, (c.strip() for c in r.strip("|").split("|")), strict=True))
             for r in rows]
    assert [c["variant"] for c in cells] == ["MXFP4\\_triton (SIMULATED)",
                                             "NVFP4\\_marlin (SIMULATED)"]
    assert cells[0]["MoE GEMM"] == "39 % · tensor cores: no"
    assert cells[1]["MoE GEMM"] == "27 % · tensor cores: yes"
    assert all(c["capture"].endswith("at C=16") and float(c["tok/s"]) > 0 for c in cells)
    assert cells[0]["roofline"] == "roofline n/a: no active parameter count"
    assert cells[1]["roofline"].endswith("%")
    assert "share of a decode step" in md and "Kernel families per variant" in \
        report.to_html(rep)
    [moe] = [f for f in rep.kernels[1].families if f.key == "moe_gemm"]
    assert moe.tensor_cores is True and moe.share == pytest.approx(0.27, abs=0.005)
