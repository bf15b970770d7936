"""The dashboard of a host made of two nodes, frozen: 16 GPUs under two node headers at
160x48, one summary row per node at 80x24, both nodes' logs with a node column."""

from __future__ import annotations

import pytest
from snapshot_apps.frozen import frozen_pair_app
from test_ui_snapshots import settle


@pytest.mark.parametrize("size", ((160, 48), (80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
def test_pair_dashboard(snap_compare: object, size: tuple[int, int]) -> None:
    assert snap_compare(frozen_pair_app(), terminal_size=size,  # type: ignore[operator]
                        run_before=settle)
