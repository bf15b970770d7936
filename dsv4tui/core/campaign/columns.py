"""The columns of every per-level table, defined once for the CLI and the dashboard.

Each column says which statistic it shows (``TTFT p50``, never a bare ``TTFT``), where the
number is in a level's stats (the agent's ``level`` event, docs/metrics.md), and how it is
printed. Both faces show :data:`LEVEL_COLUMNS` by default: the CLI's ``level_table`` (sweep,
``runs show``) and the dashboard's live sweep table; exports add :data:`DETAIL_COLUMNS`.
:data:`COMPARE_COLUMNS` are the comparison's (``runs compare``, the compare view, its export).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    key: str  # stable name: JSON / CSV field
    title: str  # says the statistic: "TTFT p50"
    path: tuple[str, ...] = ()  # where the number is in a level's stats
    unit: str = ""  # "ms", "%"; the CLI puts it in the header, the dashboard in the cell
    decimals: int = 1
    width: int = 8  # the dashboard's column width
    change: bool = False  # compare: followed by its % change against the baseline
    # A quantile read from a server's histogram is only known to a bucket: where its
    # [lo, hi] bounds are in the stats (hi None: above the last bound). Cells show the bucket.
    bucket: tuple[str, ...] = ()
    optional: bool = False  # compare: left out of tables when no run has a value for it

    @property
    def header(self) -> str:
        """The CLI's header: the title with its unit (``TTFT p50 ms``)."""
        if not self.unit or self.unit == "%":
            return self.title if self.unit != "%" else f"{self.title} %"
        return f"{self.title} {self.unit}"

    def value(self, stats: Mapping[str, Any]) -> float | None:
        cur: Any = stats
        for part in self.path or (self.key,):
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(part)
        return cur if isinstance(cur, (int, float)) and not isinstance(cur, bool) else None

    def text(self, value: float | None, *, none: str = "-", unit: bool = False) -> str:
        """``value`` printed with this column's decimals (``unit``: with its unit)."""
        if value is None:
            return none
        out = f"{value:,.{self.decimals}f}"
        if unit and self.unit:
            out += self.unit if self.unit == "%" else f" {self.unit}"
        return out


    def bounds(self, stats: Mapping[str, Any]) -> tuple[float, float | None] | None:
        cur: Any = stats
        for part in self.bucket:
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(part)
        if not self.bucket or not isinstance(cur, (list, tuple)) or len(cur) != 2 or \
                not isinstance(cur[0], (int, float)):
            return None
        return float(cur[0]), None if cur[1] is None else float(cur[1])

    def cell(self, stats: Mapping[str, Any], *, none: str = "-", short: bool = False) -> str:
        """The cell for a level: the number, or for a bucketed quantile its bucket
        (``400-600``; ``short``: ``0.4-0.6s`` past 10 s, as the dashboard prints ms)."""
        b = self.bounds(stats)
        if b is None:
            return self.text(self.value(stats), none=none)
        lo, hi = b
        if hi is None:
            return f">{_short_ms(lo) if short else f'{lo:,.0f}'}"
        if short:
            if hi >= 10_000:
                return f"{lo / 1000:.0f}-{hi / 1000:.0f}s"
            return f"{lo:.0f}-{hi:.0f}ms"
        return f"{lo:,.0f}-{hi:,.0f}"


def _short_ms(v: float) -> str:
    return f"{v / 1000:.0f}s" if v >= 10_000 else f"{v:.0f}ms"


def ms(key: str, stat: str, title: str, decimals: int = 0) -> Column:
    return Column(f"{key}_{stat}", f"{title} {stat}", (f"{key}_ms", stat), "ms", decimals)


OUTPUT_TOK_S = Column("output_tok_s", "tok/s", ("output_tok_s",), "", 1, 7)
TTFT_P50 = ms("ttft", "p50", "TTFT")
TTFT_P99 = ms("ttft", "p99", "TTFT")
TPOT_P50 = ms("tpot", "p50", "TPOT", 1)

# The server's own view of the level (its /metrics histograms over the level's window): a
# client-side problem shows as a gap between TTFT p50 and this.
SERVER_TTFT_P50 = Column("server_ttft_p50", "srv TTFT p50", ("server", "ttft_ms", "p50"),
                         "ms", 0, 12, bucket=("server", "ttft_ms", "p50_bucket"))
# Under a table holding server columns.
SERVER_NOTE = ("srv: the server's own /metrics over the level's window; a quantile from its "
               "histogram is only known to a bucket, shown as lo-hi")

# What both faces show for a level by default (the dashboard adds progress and status; the
# CLI adds n, ok, err, the duration and where the token counts came from).
LEVEL_COLUMNS: tuple[Column, ...] = (OUTPUT_TOK_S, TTFT_P50, TTFT_P99, TPOT_P50,
                                     SERVER_TTFT_P50)

# More statistics in exports (JSON has everything).
DETAIL_COLUMNS: tuple[Column, ...] = (
    Column("per_request_tok_s_mean", "req tok/s mean", ("per_request_tok_s_mean",)),
    ms("ttft", "mean", "TTFT"),
    ms("tpot", "mean", "TPOT", 1),
    ms("itl", "p50", "ITL", 1),
    ms("itl", "p99", "ITL", 1),
    ms("e2e", "p50", "E2E"),
    ms("e2e", "p99", "E2E"),
    Column("duration_s", "duration", ("duration_s",), "s", 1),
    Column("server_ttft_mean", "srv TTFT mean", ("server", "ttft_ms", "mean"), "ms", 1),
    Column("server_ttft_p99", "srv TTFT p99", ("server", "ttft_ms", "p99"), "ms", 0),
    Column("server_itl_mean", "srv ITL mean", ("server", "itl_ms", "mean"), "ms", 1),
    Column("server_queue_mean", "srv queue mean", ("server", "queue_ms", "mean"), "ms", 1),
    Column("server_tok_s", "srv tok/s", ("server", "output_tok_s"), "", 1),
    Column("request_throughput", "req/s", ("request_throughput",), "", 2),
    Column("rate", "rate req/s", ("rate",), "", 2),  # open-loop levels
    Column("goodput_share", "goodput share", ("goodput", "share"), "", 2),
    Column("goodput_rate", "goodput req/s", ("goodput", "rate"), "", 2),
    Column("send_lag_p99", "send lag p99", ("send_lag_ms", "p99"), "ms", 1),
)

# The comparison: per load (C or rate) and run. ``change`` columns are followed by
# "vs #<baseline>". goodput: % of the level's requests that met every --goodput target.
COMPARE_COLUMNS: tuple[Column, ...] = (
    Column("output_tok_s", "tok/s", decimals=1, width=8, change=True),
    Column("goodput_pct", "goodput", unit="%", decimals=0, width=7, optional=True),
    Column("ttft_p50_ms", "TTFT p50", unit="ms", decimals=0, width=9, change=True),
    Column("ttft_p99_ms", "TTFT p99", unit="ms", decimals=0, width=9),
    Column("tpot_p50_ms", "TPOT p50", unit="ms", decimals=1, width=9),
    Column("tensor_active", "tensor", unit="%", decimals=1, width=7),
    Column("tok_s_per_kw", "tok/s/kW", decimals=1, width=8, change=True),
    Column("roofline_pct", "roofline", unit="%", decimals=2, width=8),
)


def change_title(baseline: object) -> str:
    """The header of a % change column: names the baseline run (``vs #2``)."""
    return f"vs #{baseline}"


def fmt_change(pct: float | None, *, none: str = "-") -> str:
    return none if pct is None else f"{pct:+.1f}%"
