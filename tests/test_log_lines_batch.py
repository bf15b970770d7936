"""A batch of classified lines (the 2,000 lines/s flood's path) keeps what line-by-line keeps."""

from dsv4tui.core.view.log_lines import ERROR, INFO, MAX_LINE, WARNING, LogLines


def _batch() -> tuple[list[str], list[tuple[int, int | None]]]:
    lines = [f"[TP{i % 4}] Decode batch. #running-req: 64, gen throughput (token/s): {i}"
             for i in range(30)]
    lines += ["x" * (MAX_LINE + 500), "tab\there\r\n", "bar 10%\rbar 100%", "red \x1b[31mERR",
              "boom\n", "h200b │ [TP1] from node b"]
    classes = [(ERROR if i % 7 == 0 else WARNING if i % 5 == 0 else INFO,
                i % 4 if i % 3 else None) for i in range(len(lines))]
    return lines, classes


def test_a_batch_is_kept_as_its_lines_one_by_one() -> None:
    lines, classes = _batch()
    batch, single = LogLines(capacity=50), LogLines(capacity=50)
    for _ in range(3):  # past the capacity: the oldest fall off the same way
        assert batch.extend(lines, classes) == len(lines)
        for text, cls in zip(lines, classes, strict=True):
            single.append(text, cls)
    assert (batch.first, batch.next) == (single.first, single.next)
    assert [batch.get(s) for s in range(batch.first, batch.next)] == \
        [single.get(s) for s in range(single.first, single.next)]
    assert (batch.max_width, batch.errors, batch.ranks, batch.nodes) == \
        (single.max_width, single.errors, single.ranks, single.nodes)
    shown = [line.text for line in map(batch.get, range(batch.first, batch.next)) if line]
    assert "x" * MAX_LINE + " …" in shown  # a long line is cut, says so
    assert "tab here" in shown and "bar 100%" in shown  # tabs expanded, tqdm repaint
    assert not any("\x1b" in t for t in shown)  # no terminal control from a server's line
    assert batch.nodes == ["h200b"]
