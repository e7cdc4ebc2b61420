"""Arrays: ``prefixItems`` / list-form ``items``, rest items, counts, ``contains``, uniqueness.

Element ``i`` of an array uses the ``i``-th prefix schema, later ones the rest schema
(``items`` in 2020-12 spelling, ``additionalItems`` after a list-form ``items``). Counts become
a counted repetition ``{m,n}`` of the rest items; ``contains`` with ``minContains = m`` (no ``maxContains``) is
``(R,)*C(,R)* ...`` with ``C`` = items ∩ contains repeated ``m`` times, exact because the other
elements are unconstrained by ``contains``; beside ``minItems`` / ``maxItems`` it is a
continuation per (items, hits) counted (`_with_hits`), and several ``contains`` merged from
``allOf`` parts are an item for each, met in every order (`_several_hits`); a ``contains``
that every value of finitely many listed items holds is ``minItems: 1``. ``uniqueItems`` is enforced by enumerating the
arrays of distinct values when the item domain is a small finite set; over open item kinds
(``{"type": "string"}``, ``"integer"``, ``"number"``: an infinite domain) the array is
compiled without it and its place recorded in the compiler's
:class:`~formcast.grammar.json_schema.unique_plan.UniqueItemsPlan`, for the matcher
(:mod:`~formcast.grammar.json_schema.unique_items`) to enforce. On the auto route a
``maxItems`` whose written-out items would pass the chain budget is recorded there too, for
the matcher to count (`_counts_items`).
"""

from __future__ import annotations

import itertools
import json
import math
from typing import TYPE_CHECKING, Any

from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.nfa_builder import unshared_states
from formcast.grammar.json_schema.item_automaton import ItemAutomaton
from formcast.grammar.json_schema.merge import CONTAINS_ALSO_KEY, VALIDATION_KEYWORDS
from formcast.grammar.json_schema.unique_plan import (
    ANY_KIND,
    ELEMENT,
    ITEM_KINDS,
    OBJECT_KIND,
    EnumDomain,
)
from formcast.grammar.json_schema.values import equality_key
from formcast.grammar.regex.combinators import alt, joined, opt, repeat, seq, star
from formcast.grammar.regex.syntax_tree import EMPTY, Node, to_python_regex

if TYPE_CHECKING:
    from formcast.grammar.json_schema.compiler import SchemaCompiler

MAX_UNIQUE_ARRAYS = 400
# the unbounded-value marker byte (compiler.MARKER): an item automaton reading it holds values
# nested without bound, which the item automaton cannot follow
_MARKER = 0x01


def array_tree(c: SchemaCompiler, s: dict, ptr: str, is_guarded: bool = False) -> Node | None:
    """The array instances of schema ``s`` (already merged, refs resolved); ``is_guarded``:
    ``s`` is a uniqueItems array with its keyword removed, which the matcher enforces."""
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
    with c.member(ELEMENT):
        prefix_trees = [c.compile(p, f"{ptr}/prefixItems/{i}") for i, p in enumerate(prefix)]
        rest_tree = c.compile(rest, f"{ptr}/{rest_key}")
    contains = s.get("contains")
    min_contains = int(s.get("minContains", 1)) if contains is not None else 0
    is_unique = bool(s.get("uniqueItems")) and (max_n is None or max_n > 1)
    also = s.get(CONTAINS_ALSO_KEY, [])  # (allOf parts' own contains: an item for each)
    if contains is not None and "minContains" not in s and "maxContains" not in s:
        # items of finitely many listed values that all hold a contains: any one item does
        values = c.listed_values(rest, f"{ptr}/{rest_key}") if not prefix else None
        if values:
            held = [h for h in [contains, *also] if c.admits_all(h, list(values.values()))]
            if held:
                kept = [h for h in [contains, *also] if not any(h is x for x in held)]
                contains, also = (kept[0], kept[1:]) if kept else (None, [])
                min_contains = 1 if contains is not None else 0
                min_n = max(min_n, 1)  # (above max_n: no array, as the counts below find)
    if max_n == 0 and (min_contains > 0 or also):
        return None  # (no item to hold a contains: e.g. a negated array case beside maxItems 0)
    if also and (
        is_unique
        or prefix
        or min_n > 1
        or max_n is not None
        or "minContains" in s
        or "maxContains" in s
        or len(also) > 2
    ):
        c.refuse(
            "several contains together with uniqueItems, prefixItems, item counts, "
            "minContains / maxContains or more than three of them",
            ptr,
            "contains",
        )
        also = []  # (lenient: the first contains alone, a larger language)
    if is_unique and min_contains > 0:
        # the guard keeps the items distinct; the contains tree below stays live as long as
        # the matching items hold minContains distinct values (else no array exists)
        has_hits = _has_distinct_hits(c, rest, contains, min_contains, ptr)
        if has_hits is False:
            return None
        if has_hits is None:
            c.refuse(
                "uniqueItems together with contains whose matching items cannot be counted",
                ptr,
                "uniqueItems",
            )
            is_unique = False
    is_counted = not is_unique and _counts_items(c, prefix, rest_tree, min_n, max_n, sep, ptr)
    if c.unique_plan is not None and not is_guarded and not is_unique and not is_counted:
        c.unique_plan.note_array()  # (a unique array is recorded by _unique, as it turns out)
    if is_unique:  # guarded (array_tree again, without the keyword), or enumerated
        return _unique(c, s, ptr, prefix, rest, min_n, max_n, sep)
    if contains is not None and "maxContains" in s:
        c.refuse("maxContains cannot be expressed without a complement", ptr, "maxContains")
    if contains is not None and also:
        if rest_tree is None:
            return None
        body = _several_hits(c, rest, rest_tree, [contains, *also], sep, ptr)
        return None if body is None else lay.container("[]", body, False, c.depth)
    if contains is not None and min_contains > 0:
        if prefix:
            c.refuse("contains together with prefixItems", ptr, "contains")
        else:
            with c.member(ELEMENT):
                hit = c.compile({"allOf": [rest, contains]}, ptr + "/contains")
            if hit is None or rest_tree is None:
                return None
            hi = None if is_counted else max_n  # (counted: the matcher refuses item hi + 1)
            body = _with_hits(c, rest_tree, hit, sep, min_contains, min_n, hi, ptr)
            return None if body is None else lay.container("[]", body, False, c.depth)

    # tail(i): elements from position i on, each preceded by a separator if i > 0
    k = len(prefix)
    rest_lo = max(0, min_n - k)
    rest_hi = None if max_n is None or is_counted else max_n - k  # (counted: by the matcher)
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


def _several_hits(
    c: SchemaCompiler, rest: Any, item: Node, wanted: list, sep: Node, ptr: str
) -> Node | None:
    """Items (``item``, valid against ``rest``) joined by ``sep`` with, for each schema of
    ``wanted``, an item valid against it (one item may serve several): a union over the
    ordered partitions of ``wanted``, each block met by one item valid against all of its
    schemas, the blocks in that order: ``(R,)* H_1 (,R)* ,H_2 ... (,R)*``."""
    hits: dict[tuple[int, ...], Node | None] = {}
    options = []
    for blocks in _ordered_partitions(tuple(range(len(wanted)))):
        parts = []
        for block in blocks:
            if block not in hits:
                with c.member(ELEMENT):
                    hits[block] = c.compile(
                        {"allOf": [rest, *(wanted[i] for i in block)]}, ptr + "/contains"
                    )
            parts.append(hits[block])
        if any(part is None for part in parts):
            continue
        node = seq(star(seq(item, sep)), parts[0])
        for part in parts[1:]:
            node = seq(node, star(seq(sep, item)), sep, part)
        options.append(seq(node, star(seq(sep, item))))
    return alt(options)


def _ordered_partitions(members: tuple[int, ...]) -> list[list[tuple[int, ...]]]:
    """Every ordered partition of ``members`` into nonempty blocks (3 of 2 members, 13 of 3)."""
    if not members:
        return [[]]
    out = []
    for size in range(1, len(members) + 1):
        for block in itertools.combinations(members, size):
            rest = tuple(m for m in members if m not in block)
            out += [[block, *tail] for tail in _ordered_partitions(rest)]
    return out


# (items counted, hits counted) continuations _with_hits may write for item counts
MAX_HIT_STATES = 4096


def _with_hits(
    c: SchemaCompiler,
    item: Node,
    hit: Node,
    sep: Node,
    min_hits: int,
    min_n: int,
    max_n: int | None,
    ptr: str,
) -> Node | None:
    """Items (``item``; ``hit``: an item valid against ``contains`` too) joined by ``sep``: at
    least ``min_hits`` hits among ``min_n..max_n`` items.

    Without counts (``min_n <= min_hits``, no ``max_n``): ``(R,)* H ((,R)* ,H){m-1} (,R)*``.
    With them, the continuation ``T(i, j)`` after ``i`` items holding ``j`` hits (``j``
    capped at ``min_hits``, ``i`` at the count past which only hits matter) is ``sep R
    T(i + 1, j) | sep H T(i + 1, j + 1)``, ending where ``i`` and ``j`` are both enough; each
    ``T`` is shared (``share``: one nonterminal on the structural path)."""

    def hits_tail(i: int, k: int) -> Node:
        """From item ``i`` on, unbounded: at least ``k`` more hits (``k >= 1``)."""
        more = seq(star(seq(sep, item)), sep, hit)
        first = seq(star(seq(item, sep)), hit) if i == 0 else more
        return seq(first, repeat(more, k - 1, k - 1), star(seq(sep, item)))

    def plain_tail(i: int) -> Node | None:
        """From item ``i`` on, no more hits needed: the remaining counts alone."""
        need = max(0, min_n - i)
        room = None if max_n is None else max_n - i
        if i > 0:
            return repeat(seq(sep, item), need, room)
        if room == 0:
            return EMPTY
        items = seq(
            item, repeat(seq(sep, item), max(0, need - 1), None if room is None else room - 1)
        )
        return items if need > 0 else opt(items)

    if max_n is None and min_n <= min_hits:
        return hits_tail(0, min_hits)
    if max_n is not None and max_n < min_hits:
        return None
    last = max_n if max_n is not None else min_n  # past it (unbounded): only hits count
    if (last + 1) * (min_hits + 1) > MAX_HIT_STATES:
        c.refuse(
            f"contains with item counts: {last + 1} x {min_hits + 1} continuations (over "
            f"{MAX_HIT_STATES})",
            ptr,
            "contains",
        )
        return hits_tail(0, min_hits)  # (lenient: the counts dropped, a larger language)
    found: dict[tuple[int, int], Node | None] = {}
    for i in range(last, -1, -1):  # T(i, j) from T(i + 1, .)
        for j in range(min_hits, -1, -1):
            if j == min_hits:
                node = plain_tail(i)
            elif i == last and max_n is None:
                node = hits_tail(i, min_hits - j)
            elif i == last:
                node = None  # no room for the missing hits
            else:
                lead = EMPTY if i == 0 else sep
                on_item, on_hit = found[(i + 1, j)], found[(i + 1, j + 1)]
                node = alt(
                    [
                        None if on_item is None else seq(lead, item, on_item),
                        None if on_hit is None else seq(lead, hit, on_hit),
                    ]
                )
            found[(i, j)] = node if node is None or i == 0 else c.share(node)
    return found[(0, 0)]


def _counts_items(
    c: SchemaCompiler,
    prefix: list,
    rest_tree: Node | None,
    min_n: int,
    max_n: int | None,
    sep: Node,
    ptr: str,
) -> bool:
    """Leave ``maxItems`` to the matcher (recorded in the plan; True) where the written-out
    repetition ``(sep item){min-1, max-1}`` would take more than ``c.items_max_states`` NFA
    states: the automaton keeps ``minItems`` and an unbounded tail, and the matcher refuses
    the separator that would start item ``max + 1``. Only past ``c.count_items_above`` (more
    items than a token holds commas, plus one: no token can open the array and pass the bound
    within itself), without prefix items, and where the plan records instance paths (not in a
    complemented language or a fullmatched text)."""
    plan, above, budget = c.unique_plan, c.count_items_above, c.items_max_states
    if plan is None or above is None or budget is None or max_n is None or max_n <= above:
        return False
    if prefix or rest_tree is None or plan.num_negations > 0 or c.num_exact > 0:
        return False
    num_copies = max_n - max(min_n, 1)
    item_states = unshared_states(seq(sep, rest_tree), CompileBudget(), counts=c.state_memo)
    if item_states * num_copies <= budget:
        return False
    plan.note_item_count(max_n, ptr)
    return True


def _num_arrays(num_values: int, min_n: int, max_n: int | None) -> int:
    """How many arrays of distinct values from ``num_values`` have ``min_n..max_n`` items
    (counted up to just past ``MAX_UNIQUE_ARRAYS``)."""
    hi = num_values if max_n is None else min(max_n, num_values)
    total = 0
    for n in range(min_n, hi + 1):
        total += math.perm(num_values, n)
        if total > MAX_UNIQUE_ARRAYS:
            break
    return total


def _open_item_kind(c: SchemaCompiler, rest: Any, ptr: str) -> str | None:
    """``"string"``, ``"integer"``, ``"number"``, ``"object"`` or ``"any"`` if every proper
    prefix of an item has infinitely many completions (so that no finite set of earlier items
    can leave the matcher stuck; integers but for ``0``, any value but for the prefixes of
    ``true``/``false``/``null``, which the matcher handles), else None.

    Unbounded integers and numbers are open; a string is open without other keywords than
    ``minLength``, and with ``pattern`` / ``format`` / ``maxLength`` when its automaton is
    (`_is_open`: ``^[a-z_][a-z0-9_]*$`` is, ``maxLength`` never is); items without validation
    keywords (``true``, ``{}``, annotations only) are any value."""
    s = c._resolve(rest, ptr + "/items")
    is_unconstrained = s is True or (isinstance(s, dict) and not set(s) & VALIDATION_KEYWORDS)
    if is_unconstrained or _is_open_mix(c, s, ptr):
        return ANY_KIND  # (the inner grammar keeps the types; the matcher compares values)
    if not isinstance(s, dict) or not isinstance(s.get("type"), str):
        return None
    kind = s["type"]
    keywords = set(s) & VALIDATION_KEYWORDS
    if kind == OBJECT_KIND:
        return kind if _is_open_object(c, s, keywords, ptr) else None
    if kind not in ITEM_KINDS:
        return None
    if kind != "string":
        return kind if keywords <= {"type"} else None
    if keywords <= {"type", "minLength"}:
        return kind
    if not keywords <= {"type", "minLength", "maxLength", "pattern", "format"}:
        return None
    with c.member(ELEMENT):
        item_tree = c.compile_exact(rest, ptr + "/items")
    return kind if item_tree is not None and _is_open(item_tree) else None


def _prefix_item_kind(c: SchemaCompiler, prefix: list, rest: Any, ptr: str) -> str | None:
    """One open kind for the items of a tuple array (``prefixItems`` and the rest): the
    positions' common kind, or ``"any"`` for a mix of string, number and any items (every
    proper prefix of an item completes in infinitely many ways whatever its position, but a
    literal's); None otherwise (``integer`` beside another kind: ``0`` completes alone at
    its positions only)."""
    kinds = [_open_item_kind(c, item, ptr) for item in prefix]
    if rest is not False:
        kinds.append(_open_item_kind(c, rest, ptr))
    if None in kinds:
        return None
    if len(set(kinds)) == 1:
        return kinds[0]
    # (an object position could hold guarded arrays, which the any-value matcher reads as
    # text: objects only as the common kind)
    return ANY_KIND if set(kinds) <= {"string", "number", ANY_KIND} else None


def _is_open_mix(c: SchemaCompiler, s: Any, ptr: str) -> bool:
    """Are the items arrays of any values, or any of other open types beside them (only
    ``type`` given: ``array`` and ``string`` / ``number`` / ``boolean`` / ``null`` / an open
    ``object``)? Every proper prefix then has infinitely many completions, but those of the
    literals (the matcher's any-value checks); ``integer`` is not (``0`` completes alone)."""
    if not isinstance(s, dict) or set(s) & VALIDATION_KEYWORDS != {"type"}:
        return False
    types = [s["type"]] if isinstance(s["type"], str) else s["type"]
    if not isinstance(types, list) or "array" not in types:
        return False
    if not set(types) <= {"array", "string", "number", "boolean", "null", OBJECT_KIND}:
        return False
    return OBJECT_KIND not in types or _is_open_object(c, s, {"type"}, ptr)


def _is_open_object(c: SchemaCompiler, s: dict, keywords: set[str], ptr: str) -> bool:
    """Is every proper prefix of an item of the object schema ``s`` completed in infinitely
    many ways? True when extra keys (written after the declared ones, any name but those)
    are allowed without a count or name bound: until the closing brace another extra
    member can always follow."""
    if not keywords <= {"type", "properties", "required", "additionalProperties"}:
        return False
    extra = s.get("additionalProperties", not c.strict)
    if extra is False:
        return False
    if extra is True or extra == {}:
        return True
    with c.member(ELEMENT):  # (plan paths: refused inside anyway, see _reads_items)
        return c.compile_exact(extra, ptr + "/items/additionalProperties") is not None


def _is_open(item_tree: Node) -> bool:
    """Does every state of the item's byte automaton, except the complete-item states without
    a continuation, reach a cycle (infinitely many completions)?"""
    from formcast.errors import CompileBudgetError, GrammarError
    from formcast.grammar.json_schema.complement import byte_dfa

    try:
        dfa = byte_dfa(item_tree)
    except (CompileBudgetError, GrammarError):  # over budget, or a lookahead it cannot build
        return False
    if dfa is None:
        return False
    successors = [set(row[row >= 0].tolist()) for row in dfa.transitions]
    # states that reach a cycle: what survives removing states without successors, repeatedly
    alive = set(range(dfa.num_states))
    changed = True
    while changed:
        changed = False
        for state in list(alive):
            if not successors[state] & alive:
                alive.discard(state)
                changed = True
    return all(state in alive for state in range(dfa.num_states) if successors[state])


def _item_automaton(c: SchemaCompiler, rest: Any, ptr: str) -> ItemAutomaton | None:
    """The items as an `ItemAutomaton` (any regular item schema: objects, bounded strings,
    mixed types), or None where its automaton cannot be built: over the complement budgets,
    recursive, holding unbounded values (marker bytes), or holding guarded arrays itself."""
    from formcast.errors import CompileBudgetError, GrammarError, SchemaError
    from formcast.grammar.json_schema.complement import byte_dfa

    plan = c.unique_plan
    assert plan is not None
    num_guarded = len(plan.unique)
    try:
        with c.member(ELEMENT):
            item_tree = c.compile_exact(rest, ptr + "/items")
        dfa = byte_dfa(item_tree) if item_tree is not None else None
    except (CompileBudgetError, GrammarError, SchemaError):  # budgets, recursion
        return None
    if dfa is None or len(plan.unique) != num_guarded:
        return None
    if (dfa.transitions[:, dfa.byte_to_class[_MARKER]] >= 0).any():
        return None
    try:
        key = to_python_regex(item_tree)  # the item language's identity
    except GrammarError:  # it holds an automaton: its content digest (stable across processes)
        key = f"tree#{item_tree.hash_value:x}/{item_tree.num_chars}"
    return ItemAutomaton(dfa, key)


def _has_distinct_hits(
    c: SchemaCompiler, rest: Any, contains: Any, min_contains: int, ptr: str
) -> bool | None:
    """Do the items matching ``contains`` hold ``min_contains`` distinct values (None: their
    automaton cannot be built, or no guard can be placed here)?"""
    if c.unique_plan is None or c.unique_plan.num_negations > 0:
        return None
    hits = _item_automaton(c, {"allOf": [rest, contains]}, ptr)
    return None if hits is None else hits.has_values(min_contains)


def _enum_domain(c: SchemaCompiler, values: list, rest: Any, ptr: str) -> EnumDomain | None:
    """The string values of a finite item domain that the items' tree admits (an ``enum``
    with sibling keywords may drop some), as a guard kind; None if some value is not a
    string (number texts have several spellings)."""
    if not all(isinstance(v, str) for v in values):
        return None
    with c.member(ELEMENT):
        item_tree = c.compile_exact(rest, ptr + "/items")  # matched against texts: no cuts
    admitted = [v for v in values if c.fullmatch(item_tree, json.dumps(v, ensure_ascii=False))]
    return EnumDomain(admitted)


def _unique(c, s, ptr, prefix, rest, min_n, max_n, sep) -> Node | None:
    domain = None if prefix else c.finite_values(rest, ptr + "/items")
    plan = c.unique_plan
    unguarded = {k: v for k, v in s.items() if k != "uniqueItems"}
    if plan is not None and not prefix and plan.num_negations == 0:
        kind: str | EnumDomain | None = None
        is_enumerable = (
            domain is not None
            and "contains" not in s
            and (
                _num_arrays(len({equality_key(v) for v in domain}), min_n, max_n)
                <= MAX_UNIQUE_ARRAYS
            )
        )
        if domain is None:
            kind = _open_item_kind(c, rest, ptr)
        elif not is_enumerable:
            kind = _enum_domain(c, domain, rest, ptr)
            if kind is not None and len(kind.texts) < min_n:
                return None  # fewer distinct values than minItems
        if kind is None and not is_enumerable:
            kind = _item_automaton(c, rest, ptr)
            if kind is not None and not kind.has_values(min_n):
                return None  # fewer distinct values than minItems
        if kind is not None:
            plan.note_unique(kind, ptr)
            return array_tree(c, unguarded, ptr, True)
    if plan is not None and prefix and plan.num_negations == 0:
        kind = _prefix_item_kind(c, prefix, rest, ptr)
        if kind is not None:
            plan.note_unique(kind, ptr)
            return array_tree(c, unguarded, ptr, True)
    if plan is not None:
        plan.note_array()  # enumerated below, or refused (lenient: a plain array)
    if "contains" in s:  # (the enumeration below does not count matching items)
        c.refuse("uniqueItems together with contains needs a guard here", ptr, "uniqueItems")
        return array_tree(c, unguarded, ptr)
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
    with c.member(None):
        texts = [joined([c.literal_tree(v, rest) for v in arr], sep) for arr in arrays if arr]
    is_optional = min_n == 0
    body = alt(texts)
    if body is None and not is_optional:
        return None
    return c.layout.container("[]", body, is_optional, c.depth)
