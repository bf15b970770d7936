"""What the simulated model says: arithmetic answered right (or wrong, on purpose), else filler.

Tokens are words (with their leading space), one token per streamed chunk.
"""

from __future__ import annotations

import hashlib
import random
import re
from fractions import Fraction

from dsv4tui.agent.bench import canary

_TIMES = "*x\u00d7\u00b7"  # *, x, multiplication sign, middle dot
_ARITH_RE = re.compile(r"(-?\d+(?:\.\d+)?)\s*([" + _TIMES + r"+\-/\u00f7])\s*(-?\d+(?:\.\d+)?)")
_WORDS = ["the", "model", "routes", "each", "token", "through", "a", "small", "set", "of", "experts", "and", "the", "attention", "layers", "keep", "a", "sliding", "window", "of", "recent", "context", "while", "the", "full", "layers", "see", "the", "whole", "sequence", "so", "memory", "stays", "bounded", "and", "decode", "speed", "depends", "mostly", "on", "how", "fast", "the", "weights", "stream", "from", "memory", "into", "the", "cores", "which", "is", "why", "four", "bit", "weights", "help", "and", "why", "batching", "many", "requests", "together", "raises", "throughput", "until", "the", "kernels", "become", "compute", "bound"]
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """A rough tokenizer: words and punctuation marks."""
    return len(_TOKEN_RE.findall(text))


def _number(text: str) -> Fraction:
    return Fraction(text)


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6g}"


def arithmetic(prompt: str) -> str | None:
    """The exact result of the first ``A op B`` in the prompt, or None."""
    m = _ARITH_RE.search(prompt)
    if not m:
        return None
    a, op, b = _number(m.group(1)), m.group(2), _number(m.group(3))
    if op in _TIMES:
        return _format(a * b)
    if op == "+":
        return _format(a + b)
    if op == "-":
        return _format(a - b)
    if b == 0:
        return "undefined"
    return _format(a / b)


def _rng(prompt: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big"))


def filler(rng: random.Random, n: int) -> list[str]:
    start = rng.randrange(len(_WORDS))
    return [(" " if i else "") + _WORDS[(start + i) % len(_WORDS)] for i in range(n)]


def share_of(prompt: str) -> float:
    """A number in [0, 1) fixed by the prompt (which prompts --sim-wrong-rate gets wrong)."""
    digest = hashlib.sha256(("wrong-rate:" + prompt).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def _off_by_one(result: str) -> str:
    try:
        return str(int(result) + 1)
    except ValueError:
        return result + "1"


def answer_tokens(prompt: str, *, wrong: bool = False, off_by_one: bool = False) -> list[str]:
    """The tokens the model would emit before its natural end of sequence (``off_by_one``:
    --sim-wrong-rate's subtly wrong backend, the right answer + 1)."""
    rng = _rng(prompt)
    known = canary.known_answer(prompt)  # the accuracy canary's items: the model knows them
    if known is not None:
        return [_off_by_one(known) if off_by_one else known]
    result = arithmetic(prompt)
    if result is not None and off_by_one and not wrong:
        result = _off_by_one(result)
    if result is not None:
        if wrong:
            try:
                result = str(int(result) - 10 - rng.randrange(90))
            except ValueError:
                result = "42"
        if re.search(r"number only|only the number|just the number", prompt, re.I):
            return [result]
        m = _ARITH_RE.search(prompt)
        assert m is not None
        return [m.group(1), " " + m.group(2), " " + m.group(3), " =", " " + result, "."]
    return filler(rng, 40 + rng.randrange(80))


def continuation(prompt: str, already: int, n: int) -> list[str]:
    """Tokens after the natural end (``ignore_eos``): more filler."""
    rng = _rng(prompt + "#" + str(already))
    return [" " + t.strip() for t in filler(rng, n)]
