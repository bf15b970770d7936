"""One reader of a node's ``logs --follow`` events, for SSH node groups and Slurm steps alike:
lines get the node column, an error the agent found becomes the node's error line (a Slurm
node's errors used to be dropped)."""

from __future__ import annotations

from dsv4tui.core.nodes.streams import node_log_event


def test_lines_and_errors_of_a_node_log() -> None:
    shown: list[list[str]] = []
    errors: list[tuple[str, str]] = []
    node_log_event("node1", {"type": "lines", "lines": ["ready"]}, 8,
                   lambda lines, _classes: shown.append(lines),
                   lambda node, text: errors.append((node, text)))
    node_log_event("node1", {"type": "log_event", "event": {
        "kind": "oom", "text": "torch.OutOfMemoryError: CUDA out of memory"}}, 8,
        lambda lines, _classes: shown.append(lines),
        lambda node, text: errors.append((node, text)))
    node_log_event("node1", {"type": "log_event", "event": {"kind": "phase"}}, 8,
                   lambda lines, _classes: shown.append(lines),
                   lambda node, text: errors.append((node, text)))
    assert len(shown) == 1 and shown[0][0].startswith("node1") and shown[0][0].endswith("ready")
    assert errors == [("node1", "torch.OutOfMemoryError: CUDA out of memory")]

