"""A restart and its sanity gate as the model shows them (dsv4tui.core.view.launch), and what
the next restart of a profile uses (dsv4tui.core.view.next_launch), without Textual."""

from __future__ import annotations

import asyncio

from dsv4tui.core.bench_runner import SanityOutcome
from dsv4tui.core.errors import UserError
from dsv4tui.core.server.control import StartupStep
from dsv4tui.core.view import launch
from dsv4tui.core.view.model import ProfileChoice, SanityView, UiModel
from dsv4tui.core.view.next_launch import NextLaunch
from dsv4tui.core.view.parts import SANITY, SERVER, STARTUP

LAUNCHED = launch.Launched("mxfp4", "triton", "MXFP4", 8)


def restarting() -> UiModel:
    model = UiModel()
    model.server.state = "ready"
    model.sanity = SanityView(status="passed")
    launch.restart_begins(model, LAUNCHED, 10.0)
    return model


def test_a_restart_begins_by_stopping_and_forgets_the_last_sanity_verdict() -> None:
    model = restarting()
    assert model.startup.status == "stopping" and model.startup.profile == "mxfp4"
    assert model.server.state == "stopping" and model.sanity.status == "idle"


def test_the_started_step_shows_what_runs_and_gives_the_log_to_follow() -> None:
    model = restarting()
    log = launch.step(model, StartupStep("started", event={"log": "/l/server.log"}), 11.0,
                      LAUNCHED)
    srv = model.server
    assert log == "/l/server.log"
    assert (srv.state, srv.phase, srv.profile, srv.backend, srv.tp_size) == (
        "starting", "load_weights", "mxfp4", "triton", 8)
    assert launch.step(model, StartupStep("ready"), 12.0, LAUNCHED) is None
    assert srv.state == "ready"


def test_a_failed_restart_with_error_lines_crashed_and_keeps_them() -> None:
    model = restarting()
    err = UserError("the server exited")
    err.excerpt = ["CUDA out of memory"]  # type: ignore[attr-defined]
    assert launch.restart_failed(model, err, 20.0) == (STARTUP, SERVER)
    su = model.startup
    assert (su.status, su.message, su.error_lines) == ("failed", "the server exited",
                                                       ["CUDA out of memory"])
    assert model.server.state == "crashed" and su.total(99.0) == 10.0  # the clock stopped


def test_a_cancelled_restart_is_not_known_to_have_crashed() -> None:
    model = restarting()
    launch.restart_failed(model, asyncio.CancelledError(), 20.0)
    assert model.startup.message == "cancelled" and model.server.state == "unknown"


def test_ready_applies_the_servers_status_and_gives_its_log() -> None:
    model = restarting()
    log = launch.ready(model, 30.0, {"state": "ready", "log": "/l/s.log", "pid": 42,
                                     "profile": {"name": "mxfp4", "checkpoint": "MXFP4"}})
    assert log == "/l/s.log" and model.server.pid == 42 and model.startup.status == "ready"


def test_a_campaigns_launch_shows_its_variant_and_how_it_ended() -> None:
    model = UiModel()
    launch.campaign_launch_begins(model, {"profile_name": "nvfp4", "backend": "marlin",
                                          "checkpoint": "NVFP4"}, 1.0)
    assert (model.server.profile, model.server.backend) == ("nvfp4", "marlin")
    launch.campaign_launch_ended(model, {"ok": False, "error": "no kernel image",
                                         "last_errors": ["no kernel image for sm_120"]}, 5.0)
    assert model.server.state == "crashed"
    assert model.startup.error_lines == ["no kernel image for sm_120"]


def test_a_restart_is_refused_while_a_sweep_or_a_restart_runs() -> None:
    model = UiModel()
    assert launch.why_not_restart(model) is None
    model.sweep.status = "running"
    assert launch.why_not_restart(model) == "a sweep is running: cancel it first (x)"
    model.sweep.status = "done"
    model.startup.status = "starting"
    assert launch.why_not_restart(model) == "a restart is already running"


def test_the_gate_reports_its_verdict_or_why_it_could_not_run() -> None:
    model = UiModel()
    model.server.backend = "triton"
    gate = launch.sanity_starts(model)
    assert gate.status == "running" and gate.backend == "triton"
    launch.sanity_ended(gate, SanityOutcome(passed=False, cases=[]))
    assert gate.status == "failed" and gate.at is not None
    launch.sanity_ended(gate, error="no server answers")
    assert (gate.status, gate.detail) == ("error", "no server answers")


def test_the_gate_without_a_server_to_ask_is_its_error() -> None:
    model, marked = UiModel(), []

    async def no_target() -> None:
        raise UserError("nothing answers on port 30000")

    asyncio.run(launch.sanity(model, None, no_target, [], marked.append))
    assert model.sanity.status == "error" and "port 30000" in str(model.sanity.detail)
    assert marked == [SANITY, SANITY]


def two_profiles() -> UiModel:
    model = UiModel()
    model.profiles = [ProfileChoice("mxfp4", "MXFP4", None, "triton", "/m"),
                      ProfileChoice("nvfp4", "NVFP4", None, "marlin", "/m")]
    model.active_profile = "mxfp4"
    return model


def test_a_picked_backend_stays_with_its_profile_for_the_next_restarts() -> None:
    model, nxt = two_profiles(), NextLaunch()
    assert nxt.backend_for(model, "mxfp4") == "triton"
    assert nxt.take("mxfp4", "flashinfer_mxfp4") == ("flashinfer_mxfp4", {})
    assert nxt.take("mxfp4") == ("flashinfer_mxfp4", {})  # the next restart: the same
    assert nxt.backend_for(model, "mxfp4") == "flashinfer_mxfp4"
    assert nxt.backend_for(model, "nvfp4") == "marlin"  # the other profile: its own
    assert nxt.backend_for(model, "nope") == "auto"


def test_picked_attention_flags_add_up_per_profile() -> None:
    nxt = NextLaunch()
    nxt.take("mxfp4", None, {"dsv4_attn_backend": "flashmla"})
    _, flags = nxt.take("mxfp4", None, {"dsv4_prefill_backend": None})
    assert flags == {"dsv4_attn_backend": "flashmla", "dsv4_prefill_backend": None}
    assert nxt.take("nvfp4") == (None, {})


def test_the_running_backend_and_the_sweep_label_are_what_the_server_runs() -> None:
    model, nxt = two_profiles(), NextLaunch()
    assert nxt.sweep_label(model) == "MXFP4_triton"  # nothing runs: the active profile
    model.server.profile, model.server.backend, model.server.checkpoint = ("mxfp4", "cutlass",
                                                                           "MXFP4")
    assert nxt.running_backend(model, "mxfp4") == "cutlass"
    assert nxt.running_backend(model, "nvfp4") == "marlin"
    assert nxt.sweep_label(model) == "MXFP4_cutlass"
