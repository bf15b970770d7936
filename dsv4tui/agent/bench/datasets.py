"""Prompt files for sweeps: the ShareGPT JSON format, or JSON lines of ``{"prompt": ...}``.

- **ShareGPT** (a JSON array, what ``bench_serving --dataset-name sharegpt`` reads): entries
  ``{"conversations": [{"from": "human", "value": PROMPT}, {"from": "gpt", "value": ...},
  ...]}`` (``conversation`` also accepted). As bench_serving does, entries with fewer than two
  turns are skipped and the first turn is the prompt. The output length comes from the
  reference answer (the second turn), as bench_serving takes it, but counted without a
  tokenizer (neither side has the model's): :func:`answer_tokens`, UTF-8 bytes / 4 rounded
  up (about a token per 4 characters of English; a CJK character, 3 bytes, counts 0.75). An
  entry whose answer is empty gets the plan's ``output_len``. ``--output-len`` given on the
  command line replaces every length the file set (:func:`without_lengths`), as
  bench_serving's ``--sharegpt-output-len``.
- **JSON lines**: one object per non-blank line, ``{"prompt": "...", "output_len": N}``
  (``output_len`` optional: the plan's then). A line may also be a ShareGPT entry.

Errors are one line naming the file and the line (JSON lines) or the entry (ShareGPT):
``prompts.jsonl line 3: not JSON (Expecting value)``. Prompt token counts are never guessed
here: the server's ``usage.prompt_tokens`` says what each request cost.

The console reads the file and ships the prompts with the sweep plan (``dataset_prompts``, at
most :data:`MAX_PROMPTS` prompts and :data:`MAX_BYTES` of text, a seeded sample when the file
has more); the agent never reads console paths. Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any, Dict, List, Optional, Tuple

Entry = Tuple[str, Optional[int]]  # (prompt, output_len or None: the plan's)

MAX_PROMPTS = 10000
MAX_BYTES = 4 * 1024 * 1024  # prompt text shipped with one plan
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message is one line."""


def _name(path: str) -> str:
    return os.path.basename(path) or path


def _why(exc: ValueError) -> str:
    msg = str(exc).split(":")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)
    return msg.splitlines()[0][:80] if msg else type(exc).__name__


def _sharegpt_entry(obj: Any, where: str) -> Optional[Entry]:
    """An entry's first turn, or None for one with fewer than two turns (skipped, as
    bench_serving does)."""
    if not isinstance(obj, dict):
        raise DatasetError("%s: not a JSON object" % where)
    turns = obj.get("conversations", obj.get("conversation"))
    if not isinstance(turns, list):
        raise DatasetError("%s: no \"conversations\" list (ShareGPT format)" % where)
    if len(turns) < 2:
        return None
    first = turns[0]
    value = first.get("value") if isinstance(first, dict) else None
    if not isinstance(value, str):
        raise DatasetError("%s: conversations[0] has no text \"value\"" % where)
    if not value.strip():
        return None
    second = turns[1]
    answer = second.get("value") if isinstance(second, dict) else None
    return value, answer_tokens(answer) if isinstance(answer, str) else None


def answer_tokens(text: str) -> Optional[int]:
    """The output length a reference answer stands for, without a tokenizer: its UTF-8 bytes
    / 4, rounded up (None for an empty answer: the plan's output_len then)."""
    size = len(text.strip().encode("utf-8"))
    return (size + 3) // 4 if size else None


def without_lengths(entries: List[Entry]) -> List[Entry]:
    """The entries with the file's output lengths dropped (``--output-len`` given: it wins)."""
    return [(prompt, None) for prompt, _ in entries]


def _line_entry(obj: Any, where: str) -> Optional[Entry]:
    if not isinstance(obj, dict):
        raise DatasetError("%s: not a JSON object" % where)
    if "prompt" not in obj and ("conversations" in obj or "conversation" in obj):
        return _sharegpt_entry(obj, where)
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise DatasetError("%s: \"prompt\" must be a non-empty string" % where)
    out = obj.get("output_len")
    if out is not None and (isinstance(out, bool) or not isinstance(out, int) or out < 1):
        raise DatasetError("%s: \"output_len\" must be an integer >= 1" % where)
    return prompt, out


def parse(text: str, name: str = "dataset") -> Tuple[str, List[Entry]]:
    """(format, entries) of a file's text: ``sharegpt`` for a JSON array, else ``jsonl``.
    Raises DatasetError (one line) on anything unusable, including no prompts at all."""
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        raise DatasetError("%s: the file is empty (no prompts)" % name)
    entries: List[Entry] = []
    if body.startswith("["):
        try:
            data = json.loads(body)
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            where = " line %d" % line if line else ""
            raise DatasetError("%s%s: not valid JSON (%s)" % (name, where, _why(exc))) from None
        for i, obj in enumerate(data):
            entry = _sharegpt_entry(obj, "%s entry %d" % (name, i + 1))
            if entry is not None:
                entries.append(entry)
        fmt = "sharegpt"
    else:
        for no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise DatasetError("%s line %d: not JSON (%s)" % (name, no, _why(exc))) from None
            entry = _line_entry(obj, "%s line %d" % (name, no))
            if entry is not None:
                entries.append(entry)
        fmt = "jsonl"
    if not entries:
        raise DatasetError("%s: no usable prompts (ShareGPT entries need two turns)" % name)
    return fmt, entries


def load(path: str) -> Tuple[str, List[Entry]]:
    """Read and :func:`parse` a file; DatasetError (one line) when it cannot be read."""
    name = _name(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise DatasetError("%s: %d MiB is more than we read (%d MiB)"
                               % (name, size >> 20, MAX_FILE_BYTES >> 20))
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise DatasetError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise DatasetError("%s: not UTF-8 text" % name) from None
    return parse(text, name)


def ship(entries: List[Entry], seed: int = 0, max_prompts: int = MAX_PROMPTS,
         max_bytes: int = MAX_BYTES) -> List[Entry]:
    """What travels with the plan: every entry when they fit, else a seeded sample (in
    random order, as bench_serving shuffles) of at most ``max_prompts`` entries and
    ``max_bytes`` of prompt text (at least one)."""
    total = sum(len(p.encode("utf-8")) for p, _ in entries)
    if len(entries) <= max_prompts and total <= max_bytes:
        return list(entries)
    order = list(range(len(entries)))
    random.Random("dataset:%d" % seed).shuffle(order)
    out: List[Entry] = []
    size = 0
    for i in order:
        n = len(entries[i][0].encode("utf-8"))
        if out and (len(out) >= max_prompts or size + n > max_bytes):
            if len(out) >= max_prompts:
                break
            continue
        out.append(entries[i])
        size += n
    return out


def info(path: str, fmt: str, entries: int, shipped: int) -> Dict[str, Any]:
    return {"path": path, "name": _name(path), "format": fmt, "entries": entries,
            "shipped": shipped}
