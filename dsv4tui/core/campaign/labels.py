"""Text that reaches a terminal: run labels checked when they are made, any other user- or
server-supplied string made harmless when it is shown.

* :func:`check_label` -- a new run label (the CLI's ``--label``, the dashboard's plan dialog,
  campaign variants): stripped, refused when empty, too long or holding a control character.
* :func:`safe_text` -- any string on its way to a terminal (CLI tables and lines, the
  dashboard): control characters (ESC, BEL, CR, backspace ..., C1 controls, bidi overrides)
  become visible escapes (``\\x1b``), so a label holding ``ESC[2J`` cannot clear the screen and a
  newline cannot break a table row.
* :func:`safe_line` -- one log line printed by the CLI: ANSI colour/cursor sequences are dropped
  (SGLang colours some lines), every other control character is escaped.
"""

from __future__ import annotations

import re
import unicodedata

from dsv4tui.core.errors import EXIT_CONFIG, UserError

MAX_LABEL = 120

# Bidirectional overrides and isolates can make a string read differently from what it holds.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def is_control(ch: str) -> bool:
    """A character that a terminal acts on instead of showing (or that reorders text)."""
    return unicodedata.category(ch) == "Cc" or ch in _BIDI or ch in "\u2028\u2029"


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n`` ...).

    ``keep_newlines``: newlines stay (multi-line messages), other controls are escaped.
    """
    s = "" if text is None else str(text)
    if s.isprintable() or not any(is_control(ch) for ch in s):  # the common case: as it is
        return s
    return "".join(ch if (keep_newlines and ch == "\n") or not is_control(ch) else _escape(ch)
                   for ch in s)


def safe_line(line: str) -> str:
    """One log line for the terminal: ANSI sequences dropped, other controls escaped; a
    carriage-return progress line keeps its last state (what a terminal would show)."""
    text = line.rstrip("\r\n")
    if text.isprintable():  # the common case, checked in C
        return text
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.split("\r")[-1]
    return safe_text(text)


def check_label(text: str) -> str:
    """A run label as it will be stored: stripped; UserError (exit 2) with one line saying
    what is wrong when it is empty, longer than MAX_LABEL or holds a control character."""
    label = (text or "").strip()
    if not label:
        raise UserError("label: the label is empty", EXIT_CONFIG)
    bad = sorted({_escape(ch) for ch in label if is_control(ch)})
    if bad:
        raise UserError(f"label: '{safe_text(label)}' holds control characters "
                        f"({', '.join(bad)}); use letters, digits, _ - . and spaces",
                        EXIT_CONFIG)
    if len(label) > MAX_LABEL:
        raise UserError(f"label: {len(label)} characters; at most {MAX_LABEL}", EXIT_CONFIG)
    return label
