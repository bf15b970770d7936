"""The accuracy canary: ~100 exact-answer items, scored as a share correct.

The 17x23 sanity gate says a server answers; the canary says whether a backend is *subtly*
wrong (one MoE kernel that loses a few points against another). The built-in set is generated
from a fixed seed, with its answers: multiplications like the gate's, multi-step arithmetic and
short word problems whose answer is one number. A user's own JSONL (one object a line:
``prompt``, and ``answer`` or ``answer_regex``; e.g. a gsm8k slice on the host) replaces it.

An item is correct when the last number in the answer equals ``answer`` (commas and a trailing
``.0`` ignored), or when ``answer_regex`` matches (``re.search``). Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from typing import Any, Dict, List, Optional

SEED = 20261202
SIZE = 100
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_ASK = " Answer with the number only."
_built: Optional[List[Dict[str, Any]]] = None
_by_prompt: Optional[Dict[str, str]] = None


def _word(rng: random.Random) -> "tuple[str, int]":
    kind = rng.randrange(4)
    a, b, c = rng.randint(3, 40), rng.randint(2, 19), rng.randint(2, 30)
    if kind == 0:
        return ("A crate holds %d bottles. How many bottles are in %d crates?" % (a, b), a * b)
    if kind == 1:
        a += b  # never below zero
        return ("Tom has %d marbles and gives away %d. Then he buys %d more. How many marbles "
                "does he have now?" % (a, b, c), a - b + c)
    if kind == 2:
        return ("A train travels %d km every hour. How many km does it travel in %d hours?"
                % (a + 40, b), (a + 40) * b)
    return ("A class has %d rows of %d desks and %d extra desks at the back. How many desks "
            "are there?" % (b, a, c), b * a + c)


def builtin_items() -> List[Dict[str, Any]]:
    """The built-in set (the same ``SIZE`` items, in the same order, every time)."""
    global _built
    if _built is None:
        rng = random.Random(SEED)
        items: List[Dict[str, Any]] = []
        for i in range(40):
            a, b = rng.randint(12, 99), rng.randint(12, 99)
            items.append({"name": "mul-%02d" % i, "prompt": "What is %d*%d? Number only." % (a, b),
                          "answer": str(a * b)})
        for i in range(30):
            a, b, c, d = (rng.randint(10, 99), rng.randint(10, 99), rng.randint(2, 9),
                          rng.randint(1, 50))
            items.append({"name": "steps-%02d" % i,
                          "prompt": "Compute (%d + %d) * %d - %d." % (a, b, c, d) + _ASK,
                          "answer": str((a + b) * c - d)})
        for i in range(SIZE - 70):
            text, ans = _word(rng)
            items.append({"name": "word-%02d" % i, "prompt": text + _ASK, "answer": str(ans)})
        _built = items
    return [dict(x) for x in _built]


def known_answer(prompt: str) -> Optional[str]:
    """The built-in item's answer for this exact prompt (the simulated model knows them)."""
    global _by_prompt
    if _by_prompt is None:
        _by_prompt = {x["prompt"]: x["answer"] for x in builtin_items()}
    return _by_prompt.get(prompt.strip())


def load_items(path: str) -> List[Dict[str, Any]]:
    """A user's JSONL set; ValueError names the line that is wrong."""
    items: List[Dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ValueError("cannot read canary file %s: %s" % (path, exc.strerror)) from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise ValueError("%s line %d: not a JSON object" % (path, n)) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) \
                or not obj["prompt"].strip():
            raise ValueError("%s line %d: needs a \"prompt\" (a non-empty string)" % (path, n))
        item: Dict[str, Any] = {"name": str(obj.get("name") or obj.get("id") or "line-%d" % n),
                                "prompt": obj["prompt"]}
        if obj.get("answer_regex") is not None:
            try:
                re.compile(str(obj["answer_regex"]))
            except re.error as exc:
                raise ValueError("%s line %d: answer_regex: %s" % (path, n, exc)) from None
            item["answer_regex"] = str(obj["answer_regex"])
        elif obj.get("answer") is not None and not isinstance(obj["answer"], (dict, list)):
            item["answer"] = str(obj["answer"])
        else:
            raise ValueError("%s line %d: needs \"answer\" or \"answer_regex\"" % (path, n))
        items.append(item)
    if not items:
        raise ValueError("canary file %s has no items" % path)
    return items


def _norm(text: str) -> str:
    t = text.replace(",", "").strip()
    if re.fullmatch(r"-?\d+\.0+", t):
        t = t.split(".")[0]
    return t


def correct(item: Dict[str, Any], answer: str) -> bool:
    """Is ``answer`` (the model's text) right for ``item``?"""
    if item.get("answer_regex") is not None:
        return re.search(str(item["answer_regex"]), answer) is not None
    numbers = _NUMBER_RE.findall(answer)
    return bool(numbers) and _norm(numbers[-1]) == _norm(str(item.get("answer")))


def wilson(correct: int, n: int, level: float = 0.95) -> "tuple[float, float]":
    """Wilson's interval of a share ``correct / n`` (0..1 each)."""
    if n <= 0:
        return (0.0, 1.0)
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2.0)
    p = correct / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
