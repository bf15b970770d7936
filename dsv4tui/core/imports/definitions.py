"""Whose definitions a run's numbers follow: ours, or the tool that wrote the file it was
imported from. Each tool defines TTFT, TPOT, ITL and its output-token count a little
differently; docs/metrics.md has the table (sourced from each tool's code), and
:func:`definitions_of` / :func:`mixed` tell ``runs compare`` which definition each column of
each run uses and where a comparison mixes two.

An imported level's numbers go to the column that means the same thing (aiperf's and
guidellm's "ITL" are (latency - TTFT) / (n - 1), our TPOT, so they are our TPOT column); the
tool's own names are kept in the level's ``imported``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Definition:
    code: str  # two runs with the same code measure the same thing
    text: str  # what the tool does, in a few words


@dataclass(frozen=True)
class ToolDefinitions:
    tool: str
    ttft: Definition
    tpot: Definition
    itl: Definition
    output_tokens: Definition
    output_tok_s: Definition
    source: str  # where in the tool's code (docs/metrics.md cites the same)

    def get(self, metric: str) -> Definition:
        return getattr(self, metric)  # type: ignore[no-any-return]


_TPOT = "(e2e - ttft) / (n - 1)"
_SPAN = "output tokens / (first send -> last answer)"

DEFINITIONS: dict[str, ToolDefinitions] = {
    "dsv4tui": ToolDefinitions(
        "dsv4tui",
        ttft=Definition("first-token", "first chunk with content or reasoning"),
        tpot=Definition(_TPOT, "(E2E - TTFT) / (n - 1)"),
        itl=Definition("per-token", "each chunk gap / the tokens it carried"),
        output_tokens=Definition("usage", "server usage, else counted chunks"),
        output_tok_s=Definition(_SPAN, "tokens / (first send -> last finish)"),
        source="dsv4tui/agent/bench/stats.py, dsv4tui/agent/bench/openai_stream.py"),
    "sglang bench_serving": ToolDefinitions(
        "sglang bench_serving",
        ttft=Definition("first-content", "first chunk with non-empty content/text "
                        "(reasoning not counted)"),
        tpot=Definition(_TPOT, "(latency - TTFT) / (output_len - 1)"),
        itl=Definition("per-chunk", "gaps between content chunks"),
        output_tokens=Definition("usage", "usage, else the requested length"),
        output_tok_s=Definition(_SPAN, "tokens / benchmark duration"),
        source="python/sglang/benchmark/metrics.py calculate_metrics"),
    "vllm": ToolDefinitions(
        "vllm bench serve",
        ttft=Definition("first-choices", "first SSE message with non-empty choices "
                        "(the role-only chat chunk counts)"),
        tpot=Definition(_TPOT, "(latency - TTFT) / (output_len - 1), latency at the "
                        "last choices message"),
        itl=Definition("per-chunk", "gaps between messages with choices"),
        output_tokens=Definition("usage", "usage, else its tokenizer on the text"),
        output_tok_s=Definition(_SPAN, "tokens / benchmark duration"),
        source="vllm/benchmarks/serve.py calculate_metrics, "
               "vllm/benchmarks/lib/endpoint_request_func.py"),
    "aiperf": ToolDefinitions(
        "aiperf",
        ttft=Definition("first-token", "first response with content or reasoning "
                        "(content_responses[0]; its TTFOT: first content)"),
        tpot=Definition(_TPOT, "its 'inter_token_latency': (latency - TTFT) / "
                        "(OSL - first chunk's tokens)"),
        itl=Definition("per-chunk", "its 'inter_chunk_latency': gaps between responses"),
        output_tokens=Definition("client-tokenizer", "its tokenizer on the text "
                                 "(usage with --use-server-token-count)"),
        output_tok_s=Definition(_SPAN, "total OSL / (first request -> last response)"),
        source="aiperf/metrics/types/ttft_metric.py, inter_token_latency_metric.py, "
               "inter_chunk_latency_metric.py, output_sequence_length_metric.py, "
               "output_token_throughput_metrics.py, benchmark_duration_metric.py"),
    "guidellm": ToolDefinitions(
        "guidellm",
        ttft=Definition("first-token", "first stream line with content or reasoning"),
        tpot=Definition(_TPOT, "its 'inter_token_latency_ms': (last - first token) / "
                        "(n - 1), token-weighted"),
        itl=Definition("none", "no per-chunk ITL (its 'time_per_output_token_ms' is "
                       "(last token - start) / n, TTFT included)"),
        output_tokens=Definition("usage", "usage, else stream iterations"),
        output_tok_s=Definition(_SPAN, "token events over the measured window "
                                "(its output_tokens_per_second mean)"),
        source="src/guidellm/schemas/base/request_stats.py, "
               "src/guidellm/backends/openai/http.py, "
               "src/guidellm/benchmark/schemas/metrics.py"),
}

# what a definition code means, said once for every tool that shares it
CODE_TEXT = {"first-token": "first content or reasoning token",
             "first-content": "first non-empty content (reasoning not counted)",
             "first-choices": "first message with choices (a role-only chunk counts)",
             "usage": "the server's usage", "client-tokenizer": "the client's tokenizer",
             _TPOT: "(E2E - TTFT) / (n - 1)", _SPAN: "output tokens / the measured span",
             "per-token": "chunk gaps per token", "per-chunk": "chunk gaps", "none": "none"}

# the comparison's columns and the metric each one reads
COLUMN_METRICS = (("output_tok_s", "output_tok_s"), ("ttft_p50_ms", "ttft"),
                  ("ttft_p99_ms", "ttft"), ("tpot_p50_ms", "tpot"))
METRIC_TITLES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL",
                 "output_tokens": "output tokens", "output_tok_s": "tok/s"}


def key_of(plan: Mapping[str, Any] | None) -> str:
    """Which row of :data:`DEFINITIONS` a run's numbers follow (from its plan's
    ``imported``: ours when the run was measured here, or is our own export read back)."""
    imported = (plan or {}).get("imported")
    if not isinstance(imported, Mapping):
        return "dsv4tui"
    whose = imported.get("definitions_of")
    if isinstance(whose, str) and whose in DEFINITIONS:
        return whose
    if imported.get("backend") == "dsv4tui":
        return "dsv4tui"
    source = str(imported.get("source") or "")
    return next((k for k, d in DEFINITIONS.items() if source in (k, d.tool)),
                "sglang bench_serving")


def definitions_of(plan: Mapping[str, Any] | None) -> ToolDefinitions:
    return DEFINITIONS[key_of(plan)]


def mixed(plans: Mapping[int, Mapping[str, Any] | None]) -> list[str]:
    """One line per metric whose definition differs between the runs (run id -> plan):
    ``TTFT: #3 aiperf first response with content; #1 dsv4tui first chunk ...``. Token
    counting is one of them: every tok/s and TPOT depends on it."""
    if len(plans) < 2:
        return []
    defs = {i: definitions_of(p) for i, p in plans.items()}
    lines = []
    for metric in ("ttft", "tpot", "output_tokens", "output_tok_s"):
        codes = {i: d.get(metric) for i, d in defs.items()}
        if len({c.code for c in codes.values()}) > 1:
            groups: dict[str, list[int]] = {}
            for i, c in codes.items():
                groups.setdefault(c.code, []).append(i)
            lines.append(f"{METRIC_TITLES[metric]}: " + "; ".join(
                f"{', '.join(f'#{i} {defs[i].tool}' for i in ids)}: "
                f"{CODE_TEXT.get(codes[ids[0]].code, codes[ids[0]].text)}"
                for ids in groups.values()))
    return lines
