"""Metrics on hand-computed examples (docs/metrics.md)."""

from __future__ import annotations

import pytest

from dsv4tui.agent.bench import stats


def test_percentile_interpolates_like_numpy() -> None:
    vals = [1.0, 2.0, 3.0, 4.0]
    assert stats.percentile(vals, 50) == pytest.approx(2.5)
    assert stats.percentile(vals, 90) == pytest.approx(3.7)
    assert stats.percentile(vals, 99) == pytest.approx(3.97)
    assert stats.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        stats.percentile([], 50)


def test_summarize_scales_skips_none_and_handles_empty() -> None:
    assert stats.summarize([0.1, None, 0.3], 1000.0) == {
        "mean": 200.0, "p50": 200.0, "p90": 280.0, "p99": 298.0}
    assert stats.summarize([]) == {"mean": None, "p50": None, "p90": None, "p99": None}


def test_tpot_and_itl_per_token() -> None:
    assert stats.tpot(1.0, 0.1, 10) == pytest.approx(0.1)
    assert stats.tpot(1.0, 0.1, 1) is None
    # one token per chunk: gaps are the ITLs
    assert stats.itl_values([10.0, 12.0], 3, 3) == [10.0, 12.0]
    # speculative decoding: 5 chunks carried 9 tokens -> 2 tokens per gap
    assert stats.itl_values([20.0, 20.0, 20.0, 20.0], 5, 9) == [10.0, 10.0, 10.0, 10.0]


def test_request_metrics_from_timestamps() -> None:
    # sent at 10.0; token chunks at 10.1, 10.12, 10.15; answer (not reasoning) from 10.12
    m = stats.request_metrics(10.0, [10.1, 10.12, 10.15], 10.12, 10.16, 3)
    assert m["ttft_s"] == pytest.approx(0.1)
    assert m["ttfat_s"] == pytest.approx(0.12)
    assert m["e2e_s"] == pytest.approx(0.16)
    assert m["tpot_s"] == pytest.approx(0.03)  # (0.16 - 0.1) / 2
    assert m["decode_tok_s"] == pytest.approx(33.333, abs=1e-3)
    assert m["chunks"] == 3
    assert m["chunk_gaps_ms"] == pytest.approx([20.0, 30.0])
    assert m["itl_ms"]["mean"] == pytest.approx(25.0)
    assert m["itl_ms"]["max"] == pytest.approx(30.0)
    empty = stats.request_metrics(1.0, [], None, 1.5, 0)
    assert empty["ttft_s"] is None and empty["tpot_s"] is None and empty["itl_ms"]["mean"] is None


def _req(start: float, ttft: float, e2e: float, n: int, gaps: list[float],
         source: str = "usage", ok: bool = True, kind: str | None = None) -> dict:
    return {"ok": ok, "start_s": start, "ttft_s": ttft if ok else None, "e2e_s": e2e,
            "output_tokens": n, "token_source": source, "chunks": len(gaps) + 1,
            "chunk_gaps_ms": gaps, "error_kind": kind, "prompt_tokens": 100 if ok else None}


def test_level_metrics_hand_example() -> None:
    reqs = [
        _req(0.0, 0.1, 1.0, 10, [100.0] * 9),          # finishes at 1.0
        _req(0.5, 0.2, 1.1, 12, [81.8181818] * 11),    # finishes at 1.6
        _req(0.2, 0.0, 0.01, 0, [], ok=False, kind="http_500"),
    ]
    lv = stats.level_metrics(reqs, concurrency=2, planned=3)
    assert lv["requests"] == 3 and lv["completed"] == 2 and lv["errors"] == 1
    assert lv["errors_by_kind"] == {"http_500": 1}
    assert lv["duration_s"] == pytest.approx(1.6)          # first send 0.0 -> last finish 1.6
    assert lv["output_tokens"] == 22                          # failed requests do not count
    assert lv["output_tok_s"] == pytest.approx(22 / 1.6, abs=1e-3)
    # decode tok/s: (10-1)/(1.0-0.1) = 10 and (12-1)/(1.1-0.2) = 12.222
    assert lv["per_request_tok_s_mean"] == pytest.approx((10 + 11 / 0.9) / 2, abs=1e-3)
    assert lv["ttft_ms"] == {"mean": 150.0, "p50": 150.0, "p90": 190.0, "p99": 199.0}
    assert lv["tpot_ms"]["mean"] == pytest.approx((100.0 + 900.0 / 11) / 2, abs=1e-3)
    assert lv["itl_ms"]["mean"] == pytest.approx((9 * 100.0 + 11 * 81.8181818) / 20, abs=1e-3)
    assert lv["e2e_ms"]["mean"] == pytest.approx(1050.0)
    assert lv["token_count_source"] == "usage"
    assert lv["input_tokens_mean"] == 100


def test_level_token_source_mixed_and_none() -> None:
    a = _req(0.0, 0.1, 1.0, 4, [1.0] * 3)
    b = _req(0.0, 0.1, 1.0, 4, [1.0] * 3, source="chunks")
    assert stats.level_metrics([a, b], 2)["token_count_source"] == "mixed"
    assert stats.level_metrics([b], 1)["token_count_source"] == "chunks"
    nothing = stats.level_metrics([], 4, planned=8)
    assert nothing["output_tok_s"] is None and nothing["token_count_source"] is None
    assert nothing["requests"] == 8 and nothing["duration_s"] == 0.0


def test_level_json_has_exactly_the_public_keys() -> None:
    lv = stats.level_metrics([_req(0.0, 0.1, 1.0, 4, [1.0] * 3)], 1)
    assert list(stats.level_json(lv)) == list(stats.LEVEL_JSON_KEYS)
    assert set(stats.level_json(lv)["ttft_ms"]) == {"mean", "p50", "p90", "p99"}


def test_level_short_outputs_and_requests_that_never_ran() -> None:
    def req(ok: bool, tokens: int, short: bool = False) -> dict:
        return {"ok": ok, "start_s": 0.0, "e2e_s": 1.0, "ttft_s": 0.1, "output_tokens": tokens,
                "token_source": "usage", "short_output": short,
                "error_kind": None if ok else "stall"}

    level = stats.level_metrics([req(True, 16), req(True, 4, True), req(True, 9, True),
                                 req(False, 0)], 2, 6)
    assert (level["completed"], level["errors"], level["not_run"]) == (3, 1, 2)
    assert (level["short_outputs"], level["short_min_tokens"]) == (2, 4)
    assert level["output_tokens"] == 29  # what came, short ones included
    empty = stats.level_metrics([], 8, 32)
    assert (empty["not_run"], empty["short_outputs"], empty["short_min_tokens"]) == (32, 0, None)
