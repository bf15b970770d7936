"""The dashboard's streams into the model (dsv4tui.core.view.streams), without Textual: the
server log followed file by file without the lines a restarted stream sends again, the
/metrics and telemetry argv, a failed stream said where its data is shown."""

from __future__ import annotations

from plugins.sim import sim_profile

from dsv4tui.core.telemetry import HostTelemetry
from dsv4tui.core.view import streams
from dsv4tui.core.view.model import UiModel
from dsv4tui.core.view.parts import DECODE, GPU, LOGS, METRICS


def lines(model: UiModel) -> list[str]:
    return model.logs.tail(100)


def test_a_restarted_stream_does_not_repeat_the_lines_we_have() -> None:
    tail = ["a", "b", "c"]
    assert streams.skip_seen(tail, ["b", "c", "d", "e"]) == ["d", "e"]
    assert streams.skip_seen(tail, ["x", "y"]) == ["x", "y"]  # nothing in common: all new
    assert streams.skip_seen([], ["a"]) == ["a"]
    # a line repeated in the file is matched on the last lines, not on its first copy
    assert streams.skip_seen(["ok", "ok"], ["ok", "ok", "ok", "new"]) == ["new"]


def test_the_log_feed_drops_resent_lines_only_after_the_first_batch() -> None:
    model, feed = UiModel(), streams.LogFeed()
    assert feed.follow(model.logs, "/logs/a.log")
    assert feed.add(model, {"type": "lines", "first_line": 1, "lines": ["one", "two"]}) == LOGS
    # the stream restarted (a reconnect): the agent sends the file from line 1 again
    feed.add(model, {"type": "lines", "first_line": 1, "lines": ["one", "two", "three"]})
    assert lines(model) == ["one", "two", "three"]


def test_a_replaced_log_file_is_said_and_read_from_its_start() -> None:
    model, feed = UiModel(), streams.LogFeed()
    feed.follow(model.logs, "/logs/a.log")
    feed.add(model, {"type": "lines", "first_line": 1, "lines": ["one"]})
    assert feed.add(model, {"type": "log_rotated"}) == LOGS
    feed.add(model, {"type": "lines", "first_line": 1, "lines": ["one"]})
    assert lines(model) == ["one", "──── log file replaced ────", "one"]


def test_following_another_log_file_says_so_and_the_same_one_is_not_followed_twice() -> None:
    model, feed = UiModel(), streams.LogFeed()
    assert feed.follow(model.logs, "/logs/a.log")
    assert not feed.follow(model.logs, "/logs/a.log")
    assert feed.follow(model.logs, "/logs/b.log")
    assert lines(model) == ["──── log: /logs/b.log ────"] and feed.path == "/logs/b.log"


def test_a_host_made_of_nodes_relabels_node_0s_lines() -> None:
    model, feed = UiModel(), streams.LogFeed()
    feed.add(model, {"type": "lines", "lines": ["x"]}, lambda ls: [f"h200a │ {s}" for s in ls])
    assert lines(model) == ["h200a │ x"]


def test_a_decode_line_of_the_log_goes_to_the_decode_history() -> None:
    model, feed = UiModel(), streams.LogFeed()
    part = feed.add(model, {"type": "log_event", "event": {"kind": "decode",
                                                            "gen_throughput": 28.7}})
    assert part == DECODE and model.decode.latest is not None
    assert model.decode.latest.gen_tok_s == 28.7


def test_metrics_follow_our_server_or_the_profiles_port() -> None:
    assert streams.metrics_args(0.5, None) == ["metrics", "--interval", "0.5"]
    prof = sim_profile(31234)
    assert streams.metrics_args(1.0, prof)[-4:] == ["--host", prof.host, "--port", "31234"]
    assert streams.log_args("/l") == ["logs", "/l", "--follow", "--lines",
                                      str(streams.LOG_HISTORY_LINES)]


def test_a_failed_stream_is_said_where_its_data_is_shown() -> None:
    model = UiModel()
    model.telemetry = HostTelemetry("h")
    assert streams.stream_error(model, "telemetry", "no NVML") == GPU
    assert streams.stream_error(model, "metrics", "HTTP 404") == METRICS
    assert model.server_metrics.last_error == "HTTP 404"
    assert streams.stream_error(model, "logs", "gone") == LOGS
    assert lines(model) == ["[dsv4tui] log stream: gone"]
    assert streams.stream_error(model, "other", "?") is None


def test_only_frames_reach_the_gpu_panel() -> None:
    model = UiModel()
    model.telemetry = HostTelemetry("h")
    assert streams.add_frame(model, {"type": "hello"}) is None
    assert streams.add_frame(model, {"type": "frame", "gpus": "not a list"}) is None
    frame = streams.add_frame(model, {"type": "frame", "seq": 1, "time": 1.0, "interval": 1.0,
                                      "source": "simulated", "gpus": [{"index": 0}]})
    assert frame is not None and model.telemetry.frames == 1
    assert streams.add_metrics(model, {"type": "frame"}) is None
