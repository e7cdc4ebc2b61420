"""Objects: properties in schema order, optional ones optional, extra keys after them.

Layout: ``{`` declared properties in ``properties`` order (required ones always present,
optional ones may be omitted) then, where the schema allows them, extra properties, ``}``.
The comma logic is the linear construction: with ``B_k`` the nonempty choices among the first
``k`` declared properties and ``E_k`` "all of them optional",
``B_k = B_{k-1}(,p_k)? | p_k`` (``p_k`` optional; ``| p_k`` only if ``E_{k-1}``) and
``B_k = (B_{k-1},)?p_k`` or ``B_{k-1},p_k`` (``p_k`` required), so every property's tree occurs
at most twice and the whole grows linearly.

Extra properties: without ``patternProperties``, keys other than the declared names
(:mod:`~formcast.grammar.json_schema.key_complement`) with values valid against ``additionalProperties``. With ``patternProperties``,
one alternative per key class (``key_classes``): the keys matching exactly the patterns ``S``
(declared names excluded) with values valid against every schema of ``S`` (against
``additionalProperties`` when ``S`` is empty); a declared name's value must also satisfy every
pattern it matches. An absent ``additionalProperties`` is ``false`` under ``strict`` and
``true`` otherwise, with or without patterns.

Member counts (``minProperties`` / ``maxProperties``): where the required members settle them,
or at most one member is allowed, the linear construction above; otherwise a count of the
members written so far runs through the declared members (``_counted_members``), and extra
members make up the rest of the bounds after them. Written out the counts repeat members
combinatorially (``C(n, lo)``); past ``max_regex_chars`` each count's continuation is a shared
part (a nonterminal on the structural path).

Dependency keywords (``dependentRequired``, ``dependentSchemas``, ``dependencies``) are a case
split into such plain objects (``dependencies`` module); the names they mention come after the
declared and required names (the private ``merge.ORDER_KEY``).

Any order (``Layout.any_order``): the members in any order, each at most once, the required
ones present, extra members anywhere between them. With ``U`` the set of declared members
written so far, the text after a member is ``T(U) = (,x)* ( "" [if required <= U] |
,p_k T(U + k) [k not in U] )`` (``x`` an extra member): one ``T`` per set, each shared by every
path that reaches it (``SchemaCompiler.share``: a nonterminal on the structural path), so the
grammar holds ``2**n`` of them, each naming each unused member once. Exact; the size bound
is ``MAX_ANY_ORDER_REFERENCES`` member references. ``dependentRequired`` (and array-valued
``dependencies``) is a condition on the set: ``""`` ends ``T(U)`` only when ``U`` holds what
its members require, and ``p_k`` is offered only when ``U + k`` can still be completed (its
closure under the requirements exists), so no path dead-ends. Schema-valued dependencies are
refused under any order.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from formcast.grammar import caches
from formcast.grammar.json_schema import ecma_pattern
from formcast.grammar.json_schema.char_dfa import KeyLanguageTooLarge
from formcast.grammar.json_schema.dependencies import dependent_object_tree, has_dependencies
from formcast.grammar.json_schema.key_classes import KeySpace
from formcast.grammar.json_schema.key_complement import key_complement
from formcast.grammar.json_schema.merge import ORDER_KEY, SOME_EXTRA_KEY
from formcast.grammar.json_schema.unique_plan import KeyClass, Member, any_key_except
from formcast.grammar.json_schema.values import DEPENDENCY_KEYWORDS
from formcast.grammar.regex.combinators import alt, literal, opt, repeat, seq, star
from formcast.grammar.regex.syntax_tree import EMPTY, Node

if TYPE_CHECKING:
    from formcast.grammar.json_schema.compiler import SchemaCompiler


@functools.lru_cache(maxsize=4096)  # pure; dumps with options builds an encoder per call
def _esc_json(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


# the most member references an any-order object's grammar may hold (n * 2**(n - 1) for n
# declared members: 11 members are 11,264 and compile in ~0.7 s on the structural path, 12
# took 1.5 s); past it the object is refused with its pointer
MAX_ANY_ORDER_REFERENCES = 12_000


def object_tree(c: SchemaCompiler, s: dict, ptr: str) -> Node | None:
    """The object instances of schema ``s`` (already merged, refs resolved)."""
    layout = c.layout
    some_extra = s.get(SOME_EXTRA_KEY)  # (a negated closed object: some extra member)
    if some_extra is not None and (
        layout.any_order
        or has_dependencies(s)
        or s.get("patternProperties")
        or "minProperties" in s
        or "maxProperties" in s
    ):
        c.refuse(
            "a member outside the declared names (the negation of a closed object) beside "
            "patternProperties, member counts, dependencies or any-order layout",
            ptr,
            "additionalProperties",
        )
        some_extra = None  # (lenient: a larger language)
    dependent: dict[str, list[str]] | None = None  # any_order: trigger -> names it requires
    if has_dependencies(s):
        dependent = _presence_dependencies(c, s, ptr) if layout.any_order else None
        if dependent is None:  # case split on the triggers' presence (dependencies module)
            return dependent_object_tree(c, s, ptr)
    key_sep = layout.key_sep()
    props: dict[str, Any] = s.get("properties") or {}
    required = [r for r in s.get("required", []) if isinstance(r, str)]
    pattern_props: dict[str, Any] = s.get("patternProperties") or {}
    if "additionalProperties" in s:
        additional = s["additionalProperties"]
    else:
        additional = not c.strict
    names_schema = s.get("propertyNames", True)
    has_names_schema = names_schema not in (True, {})
    names_tree = None
    if has_names_schema:  # keys are strings: a names schema without a type must not admit others
        names_key = {"allOf": [names_schema, {"type": "string"}]}
        names_tree = c.compile_exact(names_key, ptr + "/propertyNames")

    declared: list[tuple[str, Any, bool]] = [(n, sub, n in required) for n, sub in props.items()]
    for r in required:
        if r not in props:
            declared.append((r, None, True))
    if ORDER_KEY in s:  # dependencies reach this object: members in its layout order
        order: list[str] = s[ORDER_KEY]
        rank = {name: i for i, name in enumerate(order)}
        # an undeclared name ordered before a declared one is declared (optional, with the
        # value an extra key of that name would have: the same language, fixed position)
        last = max((rank.get(name, -1) for name, _, _ in declared), default=-1)
        is_declared = {name for name, _, _ in declared}
        declared += [(name, None, False) for name in order[:last] if name not in is_declared]
        declared.sort(key=lambda member: rank.get(member[0], len(rank)))
    pairs: list[tuple[Node, bool]] = []
    pair_names: list[str] = []
    for i, (name, sub, is_req) in enumerate(declared):
        # the keys before this one in the output: some of the earlier declared names, the
        # required ones among them always (see unique_plan.Member)
        member = Member(declared, i, layout.any_order)  # (any order: any other names)
        sub_ptr = f"{ptr}/properties/{c.pointer_token(name)}"
        if sub is None:
            matched = [p for p in pattern_props if c.pattern_matches(p, name)]
            parts = [pattern_props[p] for p in matched] or [additional]
            sub = parts[0] if len(parts) == 1 else {"allOf": parts}
            sub_ptr = ptr
        else:
            matched = [p for p in pattern_props if c.pattern_matches(p, name)]
            if matched:
                sub = {"allOf": [sub] + [pattern_props[p] for p in matched]}
        with c.member(member):
            value = c.compile(sub, sub_ptr)
        if has_names_schema and not c.fullmatch(names_tree, _esc_json(name)):
            value = None
        if value is None:
            if is_req:
                return None
            continue
        pairs.append((seq(literal(_esc_json(name)), key_sep, value), is_req))
        pair_names.append(name)

    # extra properties
    extra: Node | None = None
    some: Node | None = None  # an extra member valid against some_extra too
    if pattern_props:
        names = [n for n, _, _ in declared]
        extra = _pattern_extras(c, pattern_props, additional, names_schema, names, ptr)
    elif additional is not False:
        names = [n for n, _, _ in declared]
        with c.member(any_key_except(names)):
            val = c.compile(additional, ptr + "/additionalProperties")
        if val is not None:
            key: Node | None
            if has_names_schema:
                if any(c.fullmatch(names_tree, _esc_json(n)) for n in names):
                    c.refuse(
                        "propertyNames admitting a declared name while extra keys are allowed",
                        ptr,
                        "propertyNames",
                    )
                key = names_tree
            else:
                key = c.lexeme(key_complement(names, c.any_string, c.allow_automata))
            extra = seq(key, key_sep, val)
            if some_extra is not None:
                with c.member(any_key_except(names)):
                    some_val = c.compile(
                        {"allOf": [additional, some_extra]}, ptr + "/additionalProperties"
                    )
                some = None if some_val is None else seq(key, key_sep, some_val)
    if some_extra is not None and some is None:
        return None  # no member outside the declared names can be written

    n_req = sum(1 for _, r in pairs if r)
    n_all = len(pairs)
    min_properties = int(s.get("minProperties", 0))
    max_properties = s.get("maxProperties")
    max_properties = None if max_properties is None else int(max_properties)
    if max_properties is not None and max_properties < min_properties:
        return None
    if layout.any_order and (n_all > 1 or (n_all and extra is not None) or dependent):
        members = _Members(pairs, pair_names, {n for n, _, _ in declared}, dependent or {})
        found = _any_order_object(c, members, extra, min_properties, max_properties, ptr)
        if found is not None:  # (None: refused, and lenient: schema order below)
            return found
    if dependent is not None:  # refused above under lenient: the fixed-order case split
        return dependent_object_tree(c, s, ptr)
    extra_lo, extra_hi = 0, None
    need_nonempty = False
    if min_properties > n_req or (
        max_properties is not None and (max_properties < n_all or extra is not None)
    ):
        if extra is not None and n_req == n_all:
            extra_lo = max(0, min_properties - n_all)
            extra_hi = None if max_properties is None else max_properties - n_all
            if extra_hi is not None and extra_hi < extra_lo:
                return None
        elif (
            extra is None
            and min_properties <= 1
            and (max_properties is None or max_properties >= n_all)
        ):
            need_nonempty = min_properties == 1 and n_req == 0
            if n_all == 0 and min_properties == 1:
                return None
        elif extra is not None and min_properties <= 1 and max_properties is None:
            need_nonempty = min_properties == 1  # (n_req == 0): some declared or extra member
        elif (
            max_properties is not None and max_properties <= 1 and min_properties <= max_properties
        ):
            # at most one member: the required one alone, or any one declared or extra member
            if n_req > max_properties:
                return None
            if max_properties == 0:
                return layout.container("{}", None, False, c.depth)
            singles = [p for p, r in pairs if r or n_req == 0]
            content = alt(singles + ([extra] if extra is not None and n_req == 0 else []))
            if content is None:
                return layout.container("{}", None, False, c.depth) if min_properties == 0 else None
            return layout.container("{}", content, n_req == 0 and min_properties == 0, c.depth)
        elif max_properties is not None and max_properties < n_req:
            return None
        else:
            sep = layout.item_sep(c.depth)
            counts = (pairs, extra, sep, min_properties, max_properties)
            content, is_optional = _counted_members(*counts)
            if content is not None and content.num_chars > c.max_regex_chars:
                # written out, the counts repeat members combinatorially (C(n, lo) ways to
                # reach lo): each continuation shared instead (c.share: one nonterminal on
                # the structural path; the regex path refuses it past max_shared_chars)
                content, is_optional = _counted_members(*counts, share=c.share)
            if content is None and not is_optional:
                return None
            return layout.container("{}", content, is_optional, c.depth)

    sep = layout.item_sep(c.depth)
    body: Node | None = None  # B_k: nonempty valid sequences so far
    empty_ok = True  # E_k
    # once a member is required, B_k is B_j followed by these parts (concatenated once at the
    # end: concatenating B_k anew per member copies its items, quadratic in the members)
    after: list[Node] = []
    for pair, is_req in pairs:
        if is_req:
            if body is None:
                body = pair
            elif empty_ok:
                body = seq(opt(seq(body, sep)), pair)
            else:
                after += [sep, pair]
            empty_ok = False
        else:
            if body is None:
                body = pair
            elif empty_ok:
                body = alt([seq(body, opt(seq(sep, pair))), pair])
            else:
                after.append(opt(seq(sep, pair)))
    if after:
        body = seq(body, *after)
    if some is not None:  # extras (x) around one valid against some_extra (y): (x,)* y (,x)*
        assert extra is not None  # (some is an extra member)
        extras = seq(star(seq(extra, sep)), some, star(seq(sep, extra)))
        if body is None:
            return layout.container("{}", extras, False, c.depth)
        with_decl = seq(body, sep, extras)
        return layout.container(
            "{}", alt([with_decl, extras]) if empty_ok else with_decl, False, c.depth
        )
    # content: the non-empty member sequences; is_optional: the empty object is valid too
    is_optional = False
    content: Node | None
    if extra is not None:
        tail = repeat(seq(sep, extra), extra_lo, extra_hi)
        first = seq(
            extra,
            repeat(
                seq(sep, extra), max(0, extra_lo - 1), None if extra_hi is None else extra_hi - 1
            ),
        )
        if body is None:
            content = first
            is_optional = extra_lo == 0 and not need_nonempty
        else:
            with_decl = seq(body, tail)
            if empty_ok:
                content = alt([with_decl, first])
                is_optional = extra_lo == 0 and not need_nonempty
            else:
                content = with_decl
        if content is None and not is_optional:
            return None
    elif body is None:
        content = EMPTY
    else:
        content = body
        is_optional = empty_ok and not need_nonempty
    return layout.container("{}", content, is_optional, c.depth)


def _counted_members(
    pairs: list[tuple[Node, bool]],
    extra: Node | None,
    sep: Node,
    lo: int,
    hi: int | None,
    share: Callable[[Node], Node] | None = None,
) -> tuple[Node | None, bool]:
    """The member sequences of an object with ``lo <= members <= hi`` (``hi`` None: no upper
    bound) that declares optional members: ``(the non-empty sequences, whether {} is valid)``.

    Right to left over the declared members, with ``c`` the members written before member
    ``i`` (extras after the last): ``T_i(c)`` is the text from member ``i`` on when ``c >= 1``
    members are written (each member then starts with ``sep``), ``N_i`` the non-empty text
    from member ``i`` on when none is (no ``sep`` before the first):

        T_i(c) = sep p_i T_{i+1}(c + 1) | T_{i+1}(c)     (the second only if p_i is optional)
        N_i    = p_i T_{i+1}(1) | N_{i+1}
        T_{n+1}(c) = (sep x){max(lo - c, 0), hi - c},   N_{n+1} = x (sep x){max(lo - 1, 0), hi - 1}

    (``x`` an extra member; without extras ``T_{n+1}(c)`` is the empty string if ``c >= lo``,
    else empty.) Counts past ``lo`` behave alike when ``hi`` is None, so ``c`` stops at ``lo``
    there, where the two options share their continuation and are written
    ``(sep p_i)? T_{i+1}(lo)``; a member that would pass ``hi`` is not taken. Every
    ``T_i(c)`` is one node shared by the options that reach it (the NFA builder builds a
    shared node once), and with ``share`` one part of the result (a nonterminal on the
    structural path: the regex text of the written-out form grows like ``C(n, lo)``).
    """
    top = max(lo if hi is None else hi, 1)  # c ranges over 1..top

    def capped(count: int) -> int:
        return min(count, top)

    def ends(count: int) -> Node | None:  # T_{n+1}(count)
        need = max(lo - count, 0)
        if extra is None:
            return EMPTY if need == 0 else None
        return repeat(seq(sep, extra), need, None if hi is None else hi - count)

    after: dict[int, Node | None] = {count: ends(count) for count in range(1, top + 1)}
    nonempty: Node | None = None
    if extra is not None and (hi is None or hi >= 1):
        more = repeat(seq(sep, extra), max(lo - 1, 0), None if hi is None else hi - 1)
        nonempty = seq(extra, more)
    for pair, is_req in reversed(pairs):
        step: dict[int, Node | None] = {}
        for count in range(1, top + 1):
            rest = after[count]
            if hi is not None and count + 1 > hi:  # full: this member cannot be written
                step[count] = None if is_req else rest
            elif capped(count + 1) == count:  # at lo with no upper bound: one continuation
                member = seq(sep, pair)
                step[count] = seq(member if is_req else opt(member), rest)
            else:
                take = seq(sep, pair, after[capped(count + 1)])
                step[count] = take if is_req else alt([take, rest])
            if share is not None and step[count] is not None and step[count] != EMPTY:
                step[count] = share(step[count])
        take = seq(pair, after[capped(1)]) if hi is None or hi >= 1 else None
        nonempty = take if is_req else alt([take, nonempty])
        after = step
    is_optional = lo == 0 and not any(is_req for _, is_req in pairs)
    return nonempty, is_optional


def _presence_dependencies(c: SchemaCompiler, s: dict, ptr: str) -> dict[str, list[str]] | None:
    """``dependentRequired`` (or array-valued ``dependencies``) of ``s`` as trigger -> names,
    for any order; ``None`` where a dependency is a schema (refused: lenient falls back to the
    schema-order case split)."""
    dependent: dict[str, list[str]] = {}
    for keyword in DEPENDENCY_KEYWORDS:
        for trigger, dep in (s.get(keyword) or {}).items():
            if not isinstance(dep, list):
                c.refuse(
                    "any_order with a schema-valued dependency (dependentSchemas, or "
                    "dependencies with a schema): only the presence forms (dependentRequired, "
                    "dependencies with a list of names) are kept with members in any order",
                    ptr,
                    keyword,
                )
                return None
            dependent.setdefault(trigger, []).extend(n for n in dep if isinstance(n, str))
    return dependent


class _Members:
    """The declared members of an any-order object as bits: member ``k`` is bit ``k``, with
    ``needs[k]`` the members its presence requires (``dependentRequired``; ``-1``: a name
    that can never be present, so member ``k`` cannot be either)."""

    def __init__(
        self,
        pairs: list[tuple[Node, bool]],
        names: list[str],
        declared: set[str],
        dependent: dict[str, list[str]],
    ) -> None:
        self.pairs = pairs
        self.declared = declared
        self.dependent = dependent
        self.required = sum(1 << k for k, (_, is_req) in enumerate(pairs) if is_req)
        bit = {name: 1 << k for k, name in enumerate(names)}
        self.needs = [0] * len(pairs)
        for trigger, deps in dependent.items():
            if trigger in bit:
                k = bit[trigger].bit_length() - 1
                need = 0
                for d in deps:  # (a name listed twice is one bit)
                    need = need | bit[d] if d in bit and need >= 0 else -1
                self.needs[k] = need

    def undeclared_names(self) -> list[str]:
        """Dependency names that no declared property has (extra members could carry them)."""
        mentioned = {t for t in self.dependent} | {d for ds in self.dependent.values() for d in ds}
        return sorted(mentioned - self.declared)

    def closure(self, used: int) -> int | None:
        """The least superset of ``used`` that holds what its members require (None: none)."""
        while True:
            grown = used
            for k, need in enumerate(self.needs):
                if used >> k & 1:
                    if need < 0:
                        return None
                    grown |= need
            if grown == used:
                return used
            used = grown

    def can_close(self, used: int) -> bool:
        """Is ``used`` a complete member set (required present, dependencies met)?"""
        return used & self.required == self.required and self.closure(used) == used

    def is_live(self, used: int) -> bool:
        """Can members be added to ``used`` until it is complete?"""
        return self.closure(used | self.required) is not None


def _any_order_object(
    c: SchemaCompiler,
    members: _Members,
    extra: Node | None,
    min_properties: int,
    max_properties: int | None,
    ptr: str,
) -> Node | None:
    """The object with ``members`` in any order (module docstring); ``None`` where refused
    (lenient)."""
    pairs = members.pairs
    n = len(pairs)
    num_required = members.required.bit_count()
    need_nonempty = min_properties == 1 and num_required == 0
    if (min_properties > num_required and not need_nonempty) or (
        max_properties is not None and (extra is not None or max_properties < n)
    ):
        keyword = "minProperties" if min_properties > num_required else "maxProperties"
        c.refuse(f"{keyword} beyond the required members with any_order", ptr, keyword)
        return None
    undeclared = members.undeclared_names() if extra is not None else []
    if undeclared:
        c.refuse(
            "any_order with dependencies on names no property declares, while extra members "
            f"may carry them: {undeclared[:5]}",
            ptr,
            "dependentRequired",
        )
        return None
    if n * (1 << max(n - 1, 0)) > MAX_ANY_ORDER_REFERENCES:
        c.refuse(
            f"any_order over {n} declared properties: its grammar would hold one state per "
            f"set of members written ({n} * 2**{n - 1} member references, over "
            f"{MAX_ANY_ORDER_REFERENCES}); use the schema order or fewer properties",
            ptr,
            "properties",
        )
        return None
    sep = c.layout.item_sep(c.depth)
    extras = None if extra is None else star(seq(sep, extra))
    tails: dict[int, Node] = {}

    def tail(used: int) -> Node:  # T(used): the text after a member, `used` written so far
        found = tails.get(used)
        if found is None:
            # only sets that can still be completed are entered (is_live), so every T has
            # an option: no dead end
            options: list[Node | None] = [EMPTY] if members.can_close(used) else []
            options += [
                seq(sep, pair, tail(used | 1 << k))
                for k, (pair, _) in enumerate(pairs)
                if not used >> k & 1 and members.is_live(used | 1 << k)
            ]
            found = alt(options)
            assert found is not None
            if extras is not None:
                found = seq(extras, found)
            found = tails[used] = c.share(found)
        return found

    firsts = [
        seq(pair, tail(1 << k)) for k, (pair, _) in enumerate(pairs) if members.is_live(1 << k)
    ]
    if extra is not None and members.is_live(0):
        firsts.append(seq(extra, tail(0)))
    is_optional = members.can_close(0) and not need_nonempty
    content = alt(firsts)
    if content is None:
        return c.layout.container("{}", None, True, c.depth) if is_optional else None
    return c.layout.container("{}", content, is_optional, c.depth)


_NAME_PATTERN_KEYS = {"type", "pattern", "title", "description", "$comment", "examples", "default"}


def _pattern_extras(
    c: SchemaCompiler,
    pattern_props: dict[str, Any],
    additional: Any,
    names_schema: Any,
    names: list[str],
    ptr: str,
) -> Node | None:
    """One undeclared member of an object with ``patternProperties``.

    One alternative per key class (``key_classes``): the keys matching exactly the patterns
    ``S`` (declared names excluded) with a value valid against every schema of ``S``, or
    against ``additionalProperties`` when ``S`` is empty. A ``propertyNames`` that is a bare
    ``pattern`` restricts every class; any other ``propertyNames`` is refused here.
    """
    name_pattern = None
    if names_schema not in (True, {}):
        if (
            isinstance(names_schema, dict)
            and set(names_schema) <= _NAME_PATTERN_KEYS
            and names_schema.get("type", "string") == "string"
            and isinstance(names_schema.get("pattern"), str)
        ):
            name_pattern = names_schema["pattern"]
        else:
            c.refuse(
                "propertyNames other than a bare pattern together with patternProperties",
                ptr,
                "propertyNames",
            )
    try:
        space = KeySpace(list(pattern_props), names, name_pattern)
        classes = space.classes()
    except (ecma_pattern.PatternRefused, KeyLanguageTooLarge) as exc:
        c.refuse(f"patternProperties: {exc}", ptr, "patternProperties")
        with c.member(any_key_except(names)):  # lenient: any key and value (superset)
            return seq(c.lexeme(c.any_string), c.layout.key_sep(), c.any_value())
    members = []
    for hits in classes:
        matched = [p for p, hit in zip(pattern_props, hits, strict=True) if hit]
        if not matched:
            sub, sub_ptr = additional, ptr + "/additionalProperties"
        elif len(matched) == 1:
            sub = pattern_props[matched[0]]
            sub_ptr = f"{ptr}/patternProperties/{c.pointer_token(matched[0])}"
        else:
            sub, sub_ptr = {"allOf": [pattern_props[p] for p in matched]}, ptr
        if sub is False:
            continue
        with c.member(KeyClass(space, hits)):
            value = c.compile(sub, sub_ptr)
        if value is None:
            continue
        try:
            key = space.class_tree(hits, c.allow_automata)
        except KeyLanguageTooLarge as exc:
            c.refuse(f"patternProperties: {exc}", ptr, "patternProperties")
            key = c.any_string
        if key is not None:
            members.append(seq(c.lexeme(key), c.layout.key_sep(), value))
    return alt(members)


caches.register(
    "json_schema.key_texts", "LRU: 4096 property names as JSON text", _esc_json.cache_clear
)
