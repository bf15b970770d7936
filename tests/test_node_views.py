"""The pure parts of the dashboard on a host made of nodes: frames merged across nodes (GPU
numbering, node groups, a silent node going stale) and the log's node column."""

from __future__ import annotations

from dsv4tui.core.nodes.streams import node_column
from dsv4tui.core.nodes.telemetry import NodeFrames
from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.core.view.log_lines import ERROR, LogLines


def _frame(t: float, n: int = 8, util: float = 50.0) -> Frame:
    return Frame.from_event({"type": "frame", "time": t, "source": "simulated", "interval": 1.0,
                             "gpus": [{"index": i, "util_gpu": util} for i in range(n)]})


def test_frames_of_two_nodes_merge_into_one_host() -> None:
    now = [100.0]
    frames = NodeFrames(["h200a", "h200b"], clock=lambda: now[0])
    t = HostTelemetry("pair", clock=lambda: now[0])
    frames.feed(t, "h200a", _frame(1.0))
    merged = frames.feed(t, "h200b", _frame(1.0, util=90.0))
    assert [g.index for g in merged.gpus] == list(range(16))
    assert merged.gpus[8].util_gpu == 90.0 and merged.gpus[7].util_gpu == 50.0
    assert t.node_groups == [("h200a", list(range(8))), ("h200b", list(range(8, 16)))]
    assert frames.node_of(11) == ("h200b", 3)
    # h200b goes silent: after 3 intervals its GPUs leave the merged frames and go stale
    now[0] += 5.0
    merged = frames.feed(t, "h200a", _frame(6.0))
    assert [g.index for g in merged.gpus] == list(range(8))
    stale = {s.sample.index for s in t.gpus() if s.stale}
    assert stale == set(range(8, 16))


def test_log_lines_know_their_node_and_tp_rank() -> None:
    lines = LogLines(100)
    lines.append(node_column("h200a", 5, "[2025-11-30 12:00:00 TP3] Load weight begin."))
    lines.append(node_column("h200b", 5, "[2025-11-30 12:00:00 TP11] Load weight begin."))
    lines.append(node_column("h200b", 5, "ncclRemoteError: A call failed possibly due to a "
                             "network error or a remote process exiting prematurely."))
    a, b, err = (lines.get(i) for i in range(3))
    assert a is not None and (a.node, a.tp) == ("h200a", 3)
    assert b is not None and (b.node, b.tp) == ("h200b", 11)
    assert b.text.startswith("h200b │ [2025")
    assert err is not None and err.node == "h200b" and err.level == ERROR
    assert lines.nodes == ["h200a", "h200b"] and lines.ranks == {3, 11}
    plain = LogLines(10).append("[2025-11-30 12:00:00 TP0] Traceback (most recent call last):")
    assert plain.node is None and plain.level == ERROR
