"""The config file: defaults, the documented example, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4tui.core import config, paths
from dsv4tui.core.errors import ConfigError
from dsv4tui.main import main

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_a_missing_default_file_gives_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSV4TUI_CONFIG")
    settings, path = config.load()
    assert path == paths.config_file() and not path.exists()  # the platformdirs default
    assert settings.sweep.levels == [(1, 8), (8, 32), (16, 48)]
    assert settings.sanity.suite()[0].prompt == "What is 17*23? Number only."


def test_a_missing_file_someone_named_is_an_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for named in ("--config", "DSV4TUI_CONFIG"):
        path = tmp_path / "no" / "dir" / "c.toml"
        if named == "--config":
            argv = ["--config", str(path), "config", "check"]
        else:
            monkeypatch.setenv("DSV4TUI_CONFIG", str(path))
            argv = ["config", "check"]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"dsv4tui: error: config file not found: {path} (named by {named}; an "
                       "empty file is a valid config)")
    path.parent.mkdir(parents=True)
    path.touch()
    assert main(["config", "check"]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok")


def test_unknown_keys_get_the_nearest_real_one_and_every_error_is_shown(
        tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('them = "light"\n'
                    '[hosts.ct200.profiles.nvfp4]\nmodel_path = "/m"\n'
                    'moe_runer_backend = "marlin"\ntp_size = "eight"\n'
                    '[hosts.ct200]\nzzz = 1\n'
                    '[campaigns.c]\nhost = "ct200"\nsweep = {level = [[1, 8]]}\n'
                    'variants = [{name = "a"}]\n')
    with pytest.raises(ConfigError) as err:
        config.load(path)
    msg = err.value.message
    assert "\n" not in msg and "Extra inputs" not in msg and "more)" not in msg
    assert msg.startswith(f"config error in {path}: ")
    for part in ("them: unknown key (did you mean theme?)",
                 "hosts.ct200.profiles.nvfp4.moe_runer_backend: unknown key (did you mean "
                 "moe_runner_backend?)",
                 "hosts.ct200.profiles.nvfp4.tp_size: Input should be a valid integer, unable "
                 "to parse string as an integer (got 'eight')",
                 "hosts.ct200.zzz: unknown key (valid: ssh, python, profiles,"):
        assert part in msg, msg
    path.write_text('[campaigns.c]\nhost = "ct200"\nsweep = {level = [[1, 8]]}\n'
                    'variants = [{name = "a", moe_runer_backend = "x"}]\n')
    with pytest.raises(ConfigError) as err:
        config.load(path)
    assert ("'moe_runer_backend' is not a launch profile field (did you mean "
            "moe_runner_backend?)") in err.value.message
    path.write_text('[campaigns.c]\nhost = "ct200"\nsweep = {level = [[1, 8]]}\n'
                    'variants = [{name = "a"}]\n')
    with pytest.raises(ConfigError) as err:
        config.load(path)
    assert "campaigns.c.sweep.level: unknown key (did you mean levels?)" in err.value.message


def test_documented_example_is_valid() -> None:
    settings, _ = config.load(DOCS / "config.example.toml")
    name, prof = settings.hosts["ct200"].profile()
    assert name == "nvfp4" and prof.moe_runner_backend == "marlin"
    assert len(settings.sanity.suite()) == 2


@pytest.mark.parametrize(("text", "where", "why"), [
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nmoe_runner_backend = "marlinx"\n',
     "hosts.a.profiles.p.moe_runner_backend", "valid: auto, deep_gemm"),
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nspeculative_algorithm = "MTP"\n',
     "speculative_algorithm", "not a speculative algorithm"),
    ('[hosts.a.profiles.p]\nmodel_path = "/m"\nextra_args = ["--cuda-graph-max-bs", "8"]\n',
     "extra_args", "--cuda-graph-max-bs-decode"),
    ('[hosts.a]\nsshh = "x"\n', "hosts.a.sshh", "unknown key (did you mean ssh?)"),
    ("[sweep]\nlevels = [[0, 8]]\n", "sweep.levels", "must be >= 1"),
    ("[sweep]\nlevels = [[8, 4]]\n", "sweep.levels", "n must be at least C"),
    ("[sweep]\nseed = -1\n", "sweep.seed", "greater than or equal to 0"),
    ("theme = \n", "not valid TOML", ""),
])
def test_bad_config_one_line(tmp_path: Path, text: str, where: str, why: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        config.load(path)
    msg = err.value.message
    assert "\n" not in msg and str(path) in msg and where in msg and why in msg
    assert err.value.exit_code == 2
