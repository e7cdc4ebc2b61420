"""A small character DFA -> JSON-text regex, by state elimination.

The states of a :class:`~formcast.grammar.json_schema.char_dfa.CharDFA` that can reach acceptance become
nodes of a generalised automaton whose edges carry regex text (one edge per target: the JSON
text of its character classes, ``schema_charset.encode_charset``, or a plain character
class), plus a fresh source (``""``
to the start) and sink (``""`` from every accepting state). Eliminating node ``v`` replaces
``p -> v -> q`` by ``R(p,q) | R(p,v) R(v,v)* R(v,q)``; what is left on the source -> sink edge
is the language. Characters are encoded one by one and the encoding is a prefix code, so the
regex describes exactly the JSON texts of the DFA's strings.

Order: the node with the least estimated growth first (Brzozowski-McCluskey heuristic:
``sum |in| (outs - 1) + sum |out| (ins - 1) + |loop| (ins outs - 1)``), recomputed for the
neighbours of each eliminated node. A trie-shaped part (declared names excluded from a key
class) is then eliminated leaves first and the text stays linear in the trie. The result is
bounded by ``max_chars`` and ``MAX_NESTING`` group levels
(:class:`~formcast.grammar.json_schema.char_dfa.KeyLanguageTooLarge`).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable

import numpy as np

from formcast.grammar.json_schema.char_dfa import Alphabet, CharDFA, KeyLanguageTooLarge
from formcast.grammar.json_schema.charset import Intervals, encode_charset
from formcast.grammar.json_schema.regex_text import alt, repeat, seq

MAX_KEY_REGEX_CHARS = 200_000
# regex parsers (Python's, formcast's) recurse per nested group: stay far below their limits
MAX_NESTING = 100
_STRUCTURAL = re.compile(r"\\.|\[(?:[^\]\\]|\\.)*\]|[()]", re.DOTALL)  # escape | class | ( | )


def dfa_regex(
    dfa: CharDFA,
    alphabet: Alphabet,
    max_chars: int = MAX_KEY_REGEX_CHARS,
    encode: Callable[[Intervals], str | None] = encode_charset,
) -> str | None:
    """Regex text for ``dfa``'s language (``None``: empty).

    ``encode`` writes one character set: by default its JSON string text (the regex is then
    over JSON string content); ``schema_charset.class_regex`` gives a character-level regex.
    """
    table = dfa.table
    num_states = len(table)
    live = _co_reachable(table, dfa.is_accepting)
    if not live[0]:
        return None
    source, sink = num_states, num_states + 1
    out: list[dict[int, str]] = [{} for _ in range(num_states + 2)]
    into: list[set[int]] = [set() for _ in range(num_states + 2)]

    def connect(p: int, q: int, label: str) -> None:
        old = out[p].get(q)
        out[p][q] = label if old is None else alt([old, label])  # type: ignore[assignment]
        into[q].add(p)

    connect(source, 0, "")
    rows = table.tolist()
    for p in range(num_states):
        if not live[p]:
            continue
        by_target: dict[int, list[int]] = {}
        for c, t in enumerate(rows[p]):
            if live[t]:
                by_target.setdefault(t, []).append(c)
        for t, classes in by_target.items():
            label = encode(alphabet.charset(classes))
            if label is not None:
                connect(p, t, label)
        if dfa.is_accepting[p]:
            connect(p, sink, "")

    def weight(v: int) -> int:
        ins = [p for p in into[v] if p != v]
        outs = [q for q in out[v] if q != v]
        loop = len(out[v].get(v, ""))
        return (
            sum(len(out[p][v]) for p in ins) * (len(outs) - 1)
            + sum(len(out[v][q]) for q in outs) * (len(ins) - 1)
            + loop * (len(ins) * len(outs) - 1)
        )

    remaining = {v for v in range(num_states) if live[v]}
    heap = [(weight(v), v) for v in remaining]
    heapq.heapify(heap)
    while heap:
        w, v = heapq.heappop(heap)
        if v not in remaining or w != weight(v):
            continue
        remaining.discard(v)
        loop = out[v].pop(v, None)
        into[v].discard(v)
        star = repeat(loop, 0, None) if loop else ""
        preds = list(into[v])
        succs = list(out[v].items())
        for p in preds:
            head = out[p].pop(v)
            for q, tail in succs:
                label = seq(head, star, tail)
                connect(p, q, label)  # type: ignore[arg-type]
                if len(out[p][q]) > max_chars:
                    raise KeyLanguageTooLarge(
                        f"key-class regex over {max_chars} characters ({num_states} states)"
                    )
        for q, _ in succs:
            into[q].discard(v)
        out[v].clear()
        into[v].clear()
        for u in {*preds, *(q for q, _ in succs)} & remaining:
            heapq.heappush(heap, (weight(u), u))
    body = out[source].get(sink)
    if body is not None and _nesting_depth(body) > MAX_NESTING:
        raise KeyLanguageTooLarge(
            f"regex groups nested over {MAX_NESTING} deep ({num_states} states; e.g. a long "
            "counted repetition under a complement)"
        )
    return body


def _nesting_depth(rx: str) -> int:
    """Deepest group nesting of regex text ``rx`` (escapes and classes skipped)."""
    depth = deepest = 0
    for match in _STRUCTURAL.finditer(rx):
        c = match.group()
        if c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    return deepest


def _co_reachable(table: np.ndarray, is_accepting: np.ndarray) -> np.ndarray:
    """(n,) bool: states from which an accepting state can be reached."""
    live = is_accepting.copy()
    while True:
        grown = live | live[table].any(axis=1)
        if (grown == live).all():
            return live
        live = grown
