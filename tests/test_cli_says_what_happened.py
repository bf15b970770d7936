"""The CLI says what happened: misfit backends refused, documented flags accepted, config
typos named, errors once, control characters never reaching the terminal (issues 12, 13)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4tui.core import paths, theme_names
from dsv4tui.core.campaign.export import csv_cell, md_cell
from dsv4tui.core.campaign.labels import check_label, safe_line, safe_text
from dsv4tui.core.config import ServerProfile
from dsv4tui.core.errors import UserError
from dsv4tui.core.server.backends import backend_misfit, checkpoint_misfit
from dsv4tui.core.store import RunStore
from dsv4tui.main import main

NVFP4_HOST = """
[hosts.ct200]
ssh = "nobody@127.0.0.1:1"
[hosts.ct200.profiles.nvfp4]
model_path = "/models/DeepSeek-V4-Flash-NVFP4"
checkpoint = "NVFP4"
quantization = "modelopt_fp4"
tp_size = 8
moe_runner_backend = "marlin"
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def nvfp4_config() -> Path:
    path = paths.config_file()
    path.write_text(NVFP4_HOST)
    return path


# --- 1: one backend-fits table --------------------------------------------------------------

def test_backend_misfit_names_the_reason() -> None:
    nvfp4 = ServerProfile(model_path="/m", checkpoint="NVFP4", quantization="modelopt_fp4")
    why = backend_misfit(nvfp4, "flashinfer_mxfp4")
    assert why is not None and "MXFP4" in why and "not NVFP4" in why and "marlin" in why
    assert backend_misfit(nvfp4, "triton_kernel") is not None
    assert backend_misfit(nvfp4, "marlin") is None and backend_misfit(nvfp4, "auto") is None
    # no checkpoint label: the quantization says which format it is
    assert backend_misfit(ServerProfile(model_path="/m", quantization="mxfp4"), "deep_gemm")
    # what the table does not know is not refused
    assert checkpoint_misfit("GGUF", "marlin") is None
    assert checkpoint_misfit("NVFP4", "aiter") is None


def test_restart_refuses_a_misfit_backend_before_connecting(
        nvfp4_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for backend in ("flashinfer_mxfp4", "triton_kernel"):
        code, out, err = run(capsys, "server", "restart", "ct200", "--backend", backend)
        assert code == 2, err  # not 4: it never tried to connect
        assert len(err.strip().splitlines()) == 1 and "--force" in err and "NVFP4" in err
        assert out == ""
    code, out, err = run(capsys, "server", "start", "ct200", "--backend", "flashinfer_mxfp4",
                         "--dry-run")
    assert code == 2
    code, out, err = run(capsys, "server", "restart", "ct200", "--backend",
                         "flashinfer_mxfp4", "--dry-run", "--force")
    assert code == 0 and "warning: backend flashinfer_mxfp4 runs MXFP4" in out
    assert "--moe-runner-backend flashinfer_mxfp4" in out
    code, out, _ = run(capsys, "server", "restart", "ct200", "--backend", "flashinfer_cutlass",
                       "--dry-run")
    assert code == 0 and "warning" not in out


# --- 5: README and CLI agree ---------------------------------------------------------------

def test_server_stop_and_status_dry_run_do_not_connect(
        nvfp4_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "server", "stop", "ct200", "--dry-run")
    assert code == 0, err
    assert "would stop the server dsv4tui started on ct200" in out and "nothing was connected" in out
    code, out, _ = run(capsys, "server", "status", "ct200", "--dry-run", "--json")
    data = json.loads(out)
    assert code == 0 and data["dry_run"] and data["agent_args"][:2] == ["server", "status"]
    assert "30000" in data["agent_args"]
    # a bare host name is an ssh target (as for ssh itself): a dry run names it, connects nothing
    code, out, _ = run(capsys, "server", "stop", "nosuchhost", "--dry-run")
    assert code == 0 and "nosuchhost" in out and "nothing was connected" in out
    code, _, err = run(capsys, "server", "stop", "bad host!", "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_config_path_json(nvfp4_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "path", "--json")
    assert code == 0
    assert json.loads(out) == {"path": str(nvfp4_config), "exists": True,
                               "source": "DSV4TUI_CONFIG"}


def test_usage_errors_say_error_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "server", "restart")
    assert code == 2
    assert err.startswith("dsv4tui: error: server restart: ") and err.count("dsv4tui") == 1
    code, _, err = run(capsys, "runs", "nope")
    assert code == 2 and err.count("dsv4tui") == 1 and err.startswith("dsv4tui: error: runs:")


# --- 7: config typos never pass silently ----------------------------------------------------

@pytest.mark.parametrize(("text", "where", "valid"), [
    ('[keymap]\nrestrat = "R"\n', "keymap.restrat: unknown binding id", "restart"),
    ('[keymap]\nrestart = "b"\n', "keymap.restart: 'b' is already the key of 'backend'",
     "remap backend"),
    ('[keymap]\nsweep = ""\n', "keymap.sweep: no key given", ""),
    ('theme = "solarized"\n', "theme: unknown theme 'solarized'", "solarized-dark"),
])
def test_config_typos_are_errors(text: str, where: str, valid: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = paths.config_file()
    path.write_text(text)
    code, _, err = run(capsys, "config", "check")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(path) in err and where in err and valid in err
    code, _, err = run(capsys, "server", "status", "local", "--dry-run")  # any command
    assert code == 2 and where in err                                     # reading the config


def test_swapping_two_keys_is_fine(capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file().write_text('theme = "HC"\n[keymap]\nrestart = "b"\nbackend = "r"\n')
    code, out, err = run(capsys, "config", "check", "--json")
    assert code == 0, err and json.loads(out)["theme"] == "high-contrast"


def test_theme_flag_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--theme", "bogus")
    assert code == 2 and "unknown theme 'bogus'" in err and "high-contrast" in err
    assert len(err.strip().splitlines()) == 1


def test_theme_names_match_textual() -> None:
    from textual.theme import BUILTIN_THEMES

    assert set(theme_names.TEXTUAL_BUILTIN) == set(BUILTIN_THEMES)


# --- 10: no dashboard without a terminal ----------------------------------------------------

@pytest.mark.parametrize("argv", [["demo"], ["connect", "local"]])
def test_no_dashboard_without_a_terminal(argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)  # pytest's stdin/stdout are not terminals
    assert code == 2 and out == ""
    assert "needs a terminal" in err and len(err.strip().splitlines()) == 1


# --- 11: what reaches the terminal ----------------------------------------------------------

EVIL = "bad\x1b[2J\x1b]0;pwned\x07|=cmd\nrow"


def test_labels_with_control_characters_are_refused_and_escaped() -> None:
    assert check_label("  nvfp4_marlin ") == "nvfp4_marlin"
    for bad in ("", "   ", "a\x1b[2Jb", "a\nb", "a\u202eb", "x" * 200):
        with pytest.raises(UserError) as err:
            check_label(bad)
        assert err.value.exit_code == 2 and "\n" not in err.value.message
        assert "\x1b" not in err.value.message
    shown = safe_text(EVIL)
    assert "\x1b" not in shown and "\n" not in shown and "\x07" not in shown
    assert shown.startswith("bad\\x1b[2J")
    assert safe_line("\x1b[32mINFO\x1b[0m ok\r") == "INFO ok"
    assert safe_line("50%\r100% \x08done") == "100% \\x08done"
    assert csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and csv_cell(-3.5) == -3.5
    assert csv_cell("@x") == "'@x" and csv_cell(None) == ""
    assert md_cell("a|b") == "a\\|b"


@pytest.fixture
def evil_run() -> int:
    with RunStore() as store:
        run_id = store.start_run(label=EVIL, host="ct200", model="m\x1b[31m", backend="marlin",
                                 checkpoint="NVFP4")
        store.add_level(run_id, {"level": 0, "concurrency": 1, "requests": 1, "completed": 1,
                                 "errors": 0, "output_tok_s": 10.0,
                                 "ttft_ms": {"mean": 100.0, "p50": 90.0, "p99": 120.0}})
        store.add_request(run_id, {"level": 0, "index": 0, "ok": False,
                                   "error": "=1+2\x1b[2J", "error_kind": "http"})
        store.finish_run(run_id, "done", error="server said\x1b[2J no")
        return run_id


def test_no_control_character_reaches_the_terminal(evil_run: int,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["runs", "list"], ["runs", "show", str(evil_run)],
                 ["runs", "compare", str(evil_run)],
                 ["runs", "export", str(evil_run), "--format", "md"],
                 ["runs", "compare", str(evil_run), "--format", "md"]):
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        assert "\x1b" not in out and "\x07" not in out, argv
        # shown as an escape (Markdown escapes the backslash and the bracket once more)
        assert "bad\\x1b[2J" in out or "bad\\\\x1b\\[2J" in out, argv
    # a label's newline does not add a table row
    code, out, _ = run(capsys, "runs", "list")
    assert len(out.strip().splitlines()) == 3  # header, rule, one run
    # Markdown: the label's | is escaped, so the table keeps its columns
    code, out, _ = run(capsys, "runs", "compare", str(evil_run), "--format", "md")
    row = out.strip().splitlines()[-1]
    assert "\\|=cmd" in row
    # CSV: the error text that looks like a formula is text
    code, out, _ = run(capsys, "runs", "export", str(evil_run), "--format", "csv")
    [req] = list(csv.DictReader(io.StringIO(out)))
    assert req["error"].startswith("'=1+2") and "\x1b" not in req["error"]
    # JSON stays exact
    code, out, _ = run(capsys, "runs", "show", str(evil_run), "--json")
    assert json.loads(out)["run"]["label"] == EVIL
    # an error message from the store (holding a label) is one line, once
    code, _, err = run(capsys, "runs", "show", "no\x1b[2Jsuch")
    assert code == 2 and "\x1b" not in err and err.count("dsv4tui: error:") == 1  # not there: 2


# --- exit codes say what happened (README "Exit codes") --------------------------------------


@pytest.fixture
def agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from plugins.sim import REPO

    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


@pytest.mark.parametrize("sanity", [[], ["--no-sanity"]])
@pytest.mark.e2e
def test_a_url_sweep_nothing_answers_at_stores_nothing_and_exits_4(
        agent_importable: None, capsys: pytest.CaptureFixture[str], sanity: list[str]) -> None:
    """A refused --url measured nothing: no failed run in the store, exit 4 (a connection
    problem), one line saying so (it was exit 1 and a failed run)."""
    from plugins.sim import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "sweep", "--url", url, "--label", "nothing", "--levels", "1:2",
                         *sanity)
    assert code == 4, err
    [line] = err.strip().splitlines()
    assert "Connection refused" in line and url in line and "no run stored" in line
    with RunStore() as store:
        assert store.runs() == []


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose socket accepts connections (the kernel completes them) and never says a
    word: a hung server, or something that is no HTTP server."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.e2e
def test_a_url_that_accepts_but_never_answers_http_stores_nothing_and_exits_4(
        agent_importable: None, capsys: pytest.CaptureFixture[str], silent_port: int) -> None:
    """Connected is not answering: a sweep there would only time out (it stored a failed run,
    exit 1, "cannot connect ... ConnectTimeout" after 28 s). The reach check waits the sweep's
    stall timeout (at most 10 s) for one HTTP answer."""
    paths.config_file().write_text("[sweep]\nstall_timeout_s = 1.5\n")
    url = f"http://127.0.0.1:{silent_port}"
    code, _, err = run(capsys, "sweep", "--url", url, "--label", "silent", "--levels", "1:2",
                       "--no-sanity")
    assert code == 4, err
    [line] = err.strip().splitlines()
    assert "accepted the connection but did not answer HTTP within 1.5 s" in line, line
    assert url in line and "no run stored" in line
    with RunStore() as store:
        assert store.runs() == []


@pytest.mark.e2e
def test_a_server_that_answers_500_to_everything_is_a_server(
        agent_importable: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Any HTTP answer is an answer: the reach check lets a 500 server through, and its sweep
    fails as it should, every request's HTTP 500 in the run."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Always500(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            body = b'{"error": "internal"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Always500)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        code, _, err = run(capsys, "sweep", "--url", url, "--model", "m", "--label", "five",
                           "--levels", "1:2", "--warmup", "0", "--no-sanity", "--json")
    finally:
        srv.shutdown()
        srv.server_close()
    assert code == 1, err
    with RunStore() as store:
        [r] = store.runs()
        levels = [lv.stats for lv in store.levels(r.id)]
    assert r.status == "failed"
    assert sum(lv["errors_by_kind"].get("http_500", 0) for lv in levels) >= 1, levels


@pytest.mark.parametrize("port", ["0", "99999", "-1"])
def test_adopt_a_port_that_is_no_tcp_port_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], port: str) -> None:
    """--port 0 was taken for 'the default' (30000) and 99999 for a port nothing listens on."""
    code, _, err = run(capsys, "server", "adopt", "local", "--port", port, "--dry-run")
    assert code == 2
    [line] = err.strip().splitlines()
    assert f"--port must be a TCP port, 1 to 65535, not {port}" in line


@pytest.mark.e2e
def test_adopt_with_an_api_key_variable_the_host_lacks_is_a_usage_error(
        agent_importable: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSV4TUI_TEST_NO_SUCH_KEY", raising=False)
    code, _, err = run(capsys, "server", "adopt", "local", "--api-key-env",
                       "DSV4TUI_TEST_NO_SUCH_KEY", "--dry-run")
    assert code == 2
    [line] = err.strip().splitlines()
    assert "DSV4TUI_TEST_NO_SUCH_KEY is not set" in line and "local" in line


def test_a_report_or_compare_of_a_run_with_itself_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with RunStore() as store:
        rid = store.start_run(label="only", host="local")
        store.add_level(rid, {"level": 0, "concurrency": 1, "requests": 1, "completed": 1,
                              "errors": 0, "output_tok_s": 10.0})
        store.finish_run(rid, "done")
    for argv in (["runs", "report", str(rid), str(rid), "--out", str(tmp_path / "r.html")],
                 ["runs", "report", str(rid), "only", "--out", str(tmp_path / "r.html")],
                 ["runs", "compare", str(rid), str(rid)]):
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        [line] = err.strip().splitlines()
        assert "a run compared with itself" in line
        assert f"#{rid}" in line or f"run {rid} is given twice" in line
    assert not (tmp_path / "r.html").exists()
