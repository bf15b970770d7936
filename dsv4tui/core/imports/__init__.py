"""Other benchmark tools' result files read into the store as runs, beside our own
(``dsv4tui runs import FILE``): :func:`import_file` sniffs the file's content and hands it to
the tool's reader, each in its own module:

- SGLang ``bench_serving`` result lines: ``dsv4tui/core/campaign/bench_serving.py``
- ``vllm bench serve --save-result`` JSON: :mod:`.vllm`
- aiperf's profile export (``profile_export_aiperf.json``, ``profile_export.jsonl``):
  :mod:`.aiperf`
- guidellm's ``benchmarks.json`` / ``benchmarks.yaml``: :mod:`.guidellm`

Each reader returns an :class:`~.record.ImportedRun` (nothing written yet); :func:`record.save`
stores it in one transaction. Whose definitions the numbers follow: :mod:`.definitions`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.imports.record import Imported, ImportedRun
    from dsv4tui.core.store.runstore import RunStore

TOOLS = "SGLang bench_serving, vllm bench serve, aiperf or guidellm"


def _first_object(text: str) -> Any:
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def parse_file(path: str, text: str | None = None) -> ImportedRun:
    """Which tool wrote the file (by its content, not its name), read by that tool's
    reader."""
    from dsv4tui.core.campaign import bench_serving
    from dsv4tui.core.imports import aiperf, guidellm, vllm
    from dsv4tui.core.imports.record import read_text

    name = os.path.basename(path) or path
    text = read_text(path) if text is None else text
    if guidellm.looks_yaml(text):  # guidellm's benchmarks.yaml (JSON never starts "key:")
        return guidellm.parse(text, path)
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        if guidellm.is_report(whole):
            return guidellm.parse(text, path, whole)
        if aiperf.is_aggregate(whole):
            return aiperf.parse_aggregate(whole, path)
        if vllm.is_vllm(whole):
            return vllm.parse(text, path)
        if ("completed" in whole and "duration" in whole) or "\n" not in text.strip():
            return bench_serving.parse_file(text, path)  # one line: its errors name it
        raise UserError(f"runs import: {name}: a JSON object, but not a result file of "
                        f"{TOOLS} (keys {', '.join(sorted(whole)[:6])})", EXIT_CONFIG)
    first = _first_object(text)
    if isinstance(first, dict):
        if aiperf.is_record(first):
            return aiperf.parse_records(text, path)
        if vllm.is_vllm(first):
            return vllm.parse(text, path)
    # bench_serving's lines (its own one-line errors name the line that is wrong)
    return bench_serving.parse_file(text, path)


def import_file(store: RunStore, path: str, label: str | None = None,
                simulated: bool = False) -> Imported:
    """Read any tool's result file into the store as one run (one transaction: a file that
    fails anywhere stores nothing); ``simulated``: the file measured a simulator (only
    bench_serving's ``server_info`` says so itself)."""
    from dsv4tui.core.imports import record

    run = parse_file(path)
    run.simulated = run.simulated or simulated
    return record.save(store, run, label)
