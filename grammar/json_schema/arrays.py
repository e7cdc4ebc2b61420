"""Arrays: ``prefixItems`` / list-form ``items``, rest items, counts, ``contains``, uniqueness.

Element ``i`` of an array uses the ``i``-th prefix schema, later ones the rest schema
(``items`` in 2020-12 spelling, ``additionalItems`` after a list-form ``items``). Counts become
a counted repetition ``{m,n}`` of the rest items; ``contains`` with ``minContains = m`` (no ``maxContains``) is
``(R,)*C(,R)* ...`` with ``C`` = items ∩ contains repeated ``m`` times, exact because the other
elements are unconstrained by ``contains``. ``uniqueItems`` is enforced by enumerating the
arrays of distinct values when the item domain is a small finite set.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from formcast.grammar.json_schema.values import equality_key
from formcast.grammar.regex.combinators import alt, joined, opt, repeat, seq, star
from formcast.grammar.regex.syntax_tree import EMPTY, Node

if TYPE_CHECKING:
    from formcast.grammar.json_schema.compiler import SchemaCompiler

MAX_UNIQUE_ARRAYS = 400


def array_tree(c: SchemaCompiler, s: dict, ptr: str) -> Node | None:
    """The array instances of schema ``s`` (already merged, refs resolved)."""
    lay = c.layout
    sep = lay.item_sep(c.depth)
    items = s.get("items", True)
    if isinstance(items, list):
        prefix, rest, rest_key = items, s.get("additionalItems", True), "additionalItems"
    else:
        prefix, rest, rest_key = s.get("prefixItems", []), items, "items"
    min_n = int(s.get("minItems", 0))
    max_n = None if s.get("maxItems") is None else int(s["maxItems"])
    if max_n is not None and max_n < min_n:
        return None
    with c.child():
        prefix_trees = [c.compile(p, f"{ptr}/prefixItems/{i}") for i, p in enumerate(prefix)]
        rest_tree = c.compile(rest, f"{ptr}/{rest_key}")
    contains = s.get("contains")
    min_contains = int(s.get("minContains", 1)) if contains is not None else 0
    if contains is not None and "maxContains" in s:
        c.refuse("maxContains cannot be expressed without a complement", ptr, "maxContains")
    if contains is not None and min_contains > 0:
        if prefix or min_n > min_contains or max_n is not None:
            c.refuse("contains together with prefixItems or item counts", ptr, "contains")
        else:
            with c.child():
                hit = c.compile({"allOf": [rest, contains]}, ptr + "/contains")
            if hit is None or rest_tree is None:
                return None
            # (R,)* H ((,R)* ,H){m-1} (,R)*
            more = seq(star(seq(sep, rest_tree)), sep, hit)
            body = seq(
                star(seq(rest_tree, sep)),
                hit,
                repeat(more, min_contains - 1, min_contains - 1),
                star(seq(sep, rest_tree)),
            )
            return lay.container("[]", body, False, c.depth)
    if s.get("uniqueItems") and (max_n is None or max_n > 1):
        return _unique(c, s, ptr, prefix, rest, min_n, max_n, sep)

    # tail(i): elements from position i on, each preceded by a separator if i > 0
    k = len(prefix)
    rest_lo = max(0, min_n - k)
    rest_hi = None if max_n is None else max_n - k
    if rest_hi is not None and rest_hi < 0:
        rest_hi = 0
    is_optional = False
    content: Node | None
    if k == 0:
        if rest_tree is None or rest_hi == 0:
            if min_n > 0:
                return None
            content = EMPTY
        else:
            more = repeat(
                seq(sep, rest_tree), max(0, rest_lo - 1), None if rest_hi is None else rest_hi - 1
            )
            content = seq(rest_tree, more)
            is_optional = rest_lo == 0
    else:
        tail = repeat(seq(sep, rest_tree) if rest_tree else None, rest_lo, rest_hi)
        content = EMPTY
        for i in range(k - 1, -1, -1):
            if max_n is not None and i >= max_n:
                tail = EMPTY
                continue
            p = prefix_trees[i]
            lead = EMPTY if i == 0 else sep
            here = seq(lead, p, tail) if p is not None else None
            if i == 0:
                content, is_optional = here, min_n == 0
            else:
                tail = here if i < min_n else opt(here)
    if content is None and not is_optional:
        return None
    return lay.container("[]", content, is_optional, c.depth)


def _unique(c, s, ptr, prefix, rest, min_n, max_n, sep) -> Node | None:
    domain = None if prefix else c.finite_values(rest, ptr + "/items")
    if domain is None:
        c.refuse("uniqueItems needs a small finite item domain", ptr, "uniqueItems")
        return array_tree(c, {k: v for k, v in s.items() if k != "uniqueItems"}, ptr)
    uniq: dict[str, Any] = {}
    for v in domain:
        uniq.setdefault(equality_key(v), v)
    values = list(uniq.values())
    hi = len(values) if max_n is None else min(max_n, len(values))
    arrays = []
    for n in range(min_n, hi + 1):
        arrays += list(itertools.permutations(values, n))
        if len(arrays) > MAX_UNIQUE_ARRAYS:
            c.refuse("uniqueItems over too many distinct arrays", ptr, "uniqueItems")
            return array_tree(c, {k: v for k, v in s.items() if k != "uniqueItems"}, ptr)
    with c.child():
        texts = [joined([c.literal_tree(v, rest) for v in arr], sep) for arr in arrays if arr]
    is_optional = min_n == 0
    body = alt(texts)
    if body is None and not is_optional:
        return None
    return c.layout.container("[]", body, is_optional, c.depth)
