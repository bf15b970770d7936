"""How connect, demo and each browser tab of serve open the dashboard
(dsv4tui.tui.commands.dashboard): one App for a host, the demo's with its shorter sweep and
its simulated server started, a config's own [sweep] kept."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dsv4tui.core.config import DEMO, DEMO_PAIR, Settings, SweepPlan
from dsv4tui.tui.commands.dashboard import app_for, demo_settings


def args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"host": DEMO, "theme": None, "screen": "dashboard",
                               "no_start": False, "accept_new": False, "config": None}
    return argparse.Namespace(**{**base, **kw})


def test_the_demo_opens_on_the_demo_host_and_starts_its_server(isolated_env: Path) -> None:
    app = app_for(args(screen="bench"), demo=True)
    assert app.spec.name == DEMO and app.visit.autostart and app.start_mode == "bench"
    assert app.settings.sweep.levels == [(1, 4), (8, 16), (16, 32)]  # the demo's short sweep


def test_the_demo_with_no_start_leaves_the_server_alone(isolated_env: Path) -> None:
    assert not app_for(args(no_start=True), demo=True).visit.autostart


def test_the_demo_of_two_nodes_is_the_demo_pair(isolated_env: Path) -> None:
    assert app_for(args(nodes=2), demo=True).spec.name == DEMO_PAIR


def test_connect_opens_the_first_host_named_as_configured(isolated_env: Path) -> None:
    Path(os.environ["DSV4TUI_CONFIG"]).write_text("[sweep]\nlevels = [[2, 8]]\n")
    app = app_for(args(host=["local"]))
    assert app.spec.name == "local" and not app.visit.autostart
    assert app.settings.sweep.levels == [(2, 8)]
    assert app.server.config_path == Path(os.environ["DSV4TUI_CONFIG"])  # where adopt writes


def test_the_demos_short_sweep_does_not_replace_a_configured_one() -> None:
    configured = Settings(sweep=SweepPlan(levels=[(2, 8)]))
    assert demo_settings(configured).sweep.levels == [(2, 8)]
    assert demo_settings(Settings()).sweep.output_len == 64


def test_the_fleet_app_and_the_dashboard_do_not_import_each_other() -> None:
    """The dashboard imports its fleet half (controllers/fleet); the Fleet loop that opens
    dashboards lives with the commands, so fleet_app never imports the dashboard back."""
    import ast

    import dsv4tui.tui.fleet_app as fleet_app

    tree = ast.parse(Path(fleet_app.__file__).read_text(encoding="utf-8"))
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "dsv4tui.tui.app" not in names and not any(
        n.startswith("dsv4tui.tui.commands") for n in names)
