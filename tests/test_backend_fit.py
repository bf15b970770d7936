"""A MoE backend whose kernels cannot run on the host's GPUs never throws away a working
server (issue 23, point 4): the picker marks it ✗ with the reason, ``server restart
--backend`` refuses it before anything is stopped (``--force`` launches it anyway), and the
"from" of ``backend X -> Y`` is what runs, not the profile's value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.sim import free_port, reap_server, sim_profile

from dsv4tui import main as cli
from dsv4tui.core import paths
from dsv4tui.core.errors import UserError
from dsv4tui.core.server import backends
from dsv4tui.core.store import RunStore
from dsv4tui.core.view import choices
from dsv4tui.sim import speed

pytestmark = pytest.mark.timeout(120)

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def test_the_picker_marks_what_cannot_run_on_these_gpus() -> None:
    rows = {c.value: c for c in choices.backend_choices("NVFP4", "marlin", "modelopt_fp4",
                                                        "12.0")}
    assert rows["flashinfer_trtllm"].note.startswith(
        "✗ does not run on sm_120 (its kernels are for sm_10x)")
    assert rows["flashinfer_trtllm_routed"].note.startswith("✗ does not run on sm_120")
    assert "✗" not in rows["triton"].note and "✗" not in rows["marlin"].note
    on_b200 = {c.value: c for c in choices.backend_choices("NVFP4", "marlin", None, "10.0")}
    assert on_b200["flashinfer_trtllm"].note.startswith("✓ runs on sm_100")
    unknown = {c.value: c for c in choices.backend_choices("NVFP4", "marlin")}
    assert not unknown["flashinfer_trtllm"].note.startswith(("✗", "✓"))


def test_one_table_for_the_console_and_the_simulator() -> None:
    prof = sim_profile(1, checkpoint="NVFP4", backend="marlin", quantization="modelopt_fp4")
    with pytest.raises(UserError, match=r"flashinfer_trtllm does not run on sm_120 .*--force"):
        backends.refuse_backend(prof, "flashinfer_trtllm", "12.0")
    assert "sm_120" in str(backends.refuse_backend(prof, "flashinfer_trtllm", "12.0",
                                                   force=True))
    assert backends.refuse_backend(prof, "flashinfer_trtllm", "10.0") is None
    assert backends.refuse_backend(prof, "triton", "12.0") is None
    for backend in ("flashinfer_trtllm", "flashinfer_trtllm_routed", "triton", "marlin"):
        for gpu in speed.GPUS.values():
            cap = f"{gpu.sm // 10}.{gpu.sm % 10}"
            assert speed.runs_on(backend, gpu) == (backends.gpu_misfit(backend, cap) is None)


@pytest.fixture
def nvfp4_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Host local: an NVFP4 simulator profile (marlin) on 8 simulated RTX PRO 6000."""
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "sim-state.json"))
    monkeypatch.setenv("DSV4TUI_SIM_GPU_NAME", RTX_PRO)
    port = free_port()
    prof = sim_profile(port, checkpoint="NVFP4", backend="marlin", quantization="modelopt_fp4")
    lines = ["[hosts.local.profiles.nvfp4]"]
    for key in ("python", "module", "model_path", "served_model_name", "port", "tp_size",
                "moe_runner_backend", "checkpoint", "quantization", "extra_args"):
        lines.append(f"{key} = {json.dumps(getattr(prof, key))}")
    lines.append(f"env = {{ PYTHONPATH = {json.dumps(prof.env['PYTHONPATH'])} }}")
    paths.config_file().write_text("\n".join(lines) + "\n")
    yield port
    reap_server(paths.local_agent_state_dir())


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def status(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, _ = run_cli(capsys, "server", "status", "local", "--json")
    assert code == 0
    return dict(json.loads(out))


@pytest.mark.e2e
def test_restart_refuses_a_gpu_misfit_before_stopping_anything(
        nvfp4_local: int, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "server", "start", "local", "--backend", "triton")
    assert code == 0, out + err
    before = status(capsys)
    assert before["state"] == "ready"

    # before: the triton server was stopped, then the launch failed ("no kernel image")
    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend",
                             "flashinfer_trtllm", "--grace", "5")
    assert code == 2 and out == "", out + err
    assert len(err.strip().splitlines()) == 1
    assert "flashinfer_trtllm does not run on sm_120" in err and "--force" in err
    after = status(capsys)
    assert after["state"] == "ready" and after["pid"] == before["pid"]
    with RunStore() as store:
        assert [la.backend for la in store.launches("local")] == ["triton"]

    # the "from" is what runs (triton), not the profile's marlin
    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend", "cutlass",
                             "--grace", "5")
    assert code == 0, out + err
    assert "backend triton -> cutlass" in out.splitlines()[0]

    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend",
                             "flashinfer_trtllm", "--force", "--grace", "5")
    assert code == 1 and "warning: backend flashinfer_trtllm does not run on sm_120" in err
    assert "backend cutlass -> flashinfer_trtllm" in out.splitlines()[0]
    assert "no kernel image is available" in out


@pytest.mark.e2e
async def test_dashboard_b_marks_and_refuses_a_gpu_misfit(isolated_env: Path) -> None:
    """The demo's simulated sm_120 GPUs: ``b`` lists flashinfer_trtllm with ✗ and the reason;
    picking it says why and asks nothing (no restart confirm)."""
    from plugins.pilot import toasts, until

    from dsv4tui.core.config import HostConfig, Settings
    from dsv4tui.core.hosts.resolve import HostSpec, demo_env
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.screens.modals import ConfirmScreen, PickerScreen

    prof = sim_profile(free_port(), checkpoint="NVFP4", backend="marlin",
                       quantization="modelopt_fp4")
    spec = HostSpec("demo", HostConfig(profiles={"nvfp4": prof}, default_profile="nvfp4"),
                    "demo", env=demo_env())
    app = Dsv4App(spec, settings=Settings())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until(pilot, lambda: app.model.conn.connected
                    and app.server.host_facts.capability == "12.0", 30, "the host's GPUs")
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "backend picker")
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        by = {c.value: c for c in screen.choices}
        assert by["flashinfer_trtllm"].note.startswith("✗ does not run on sm_120")
        screen.dismiss("flashinfer_trtllm")
        await until(pilot, lambda: "does not run on sm_120" in toasts(app), 5,
                    "the refusal")
        assert not isinstance(app.screen, ConfirmScreen)
        assert "dsv4tui server restart demo --backend flashinfer_trtllm --force" in toasts(app)
