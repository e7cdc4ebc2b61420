"""UniqueItemsPlan: where ``uniqueItems`` arrays sit in the output, found while compiling.

Arrays of distinct values are not a regular language when the item domain is infinite (a
string, an integer, a number), so the schema compiler cannot put ``uniqueItems`` into the
automaton. Instead it compiles such an array without the keyword and records here the
*instance path* of the array: a tuple of segments from the document root, each a declared
property (:class:`Member`: its name, and the keys that may and must come before it, since
formcast writes declared properties in schema order), :func:`any_key_except` (the keys of
``additionalProperties`` / ``patternProperties`` values: any key but the object's declared
names, which formcast writes only as declared properties) or ``"[]"`` (an element of an
array). Inside a shared nonterminal of the structural route (a ``$ref`` target compiled once)
paths start with a :class:`RefSite`, which :meth:`UniqueItemsPlan.check` expands into the
places the nonterminal is used at (``"**"`` for a recursive one). At run time
:class:`~formcast.grammar.json_schema.unique_items.UniqueItemsGrammar` tracks the path of
every array the output opens and, inside one whose path matches a recorded pattern, masks the
tokens that would complete an item equal to an earlier one.

That is exact only if every array the grammar can write at a matching path comes from a
``uniqueItems`` schema with the same kind of items. So the plan also records every other
place arrays can come from: plain array schemas (their path), and values that may hold arrays
anywhere below them (``true`` / ``{}`` schemas, ``enum`` / ``const`` values with arrays:
their path followed by ``"**"``). The languages that ``not`` / ``if`` / overlapping
``oneOf`` subtract are not recorded (never written); what remains of the others is written
by ordinary array schemas, recorded as such.
:meth:`UniqueItemsPlan.check` refuses, with the ``uniqueItems`` pointer, any overlap.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from formcast.errors import CompileBudgetError, SchemaError

if TYPE_CHECKING:
    from formcast.grammar.json_schema.item_automaton import ItemAutomaton
    from formcast.grammar.json_schema.length_guard import LengthGuard

ELEMENT = "[]"  # a path segment: any array element
# any sequence of segments, empty included: last in a "values below" pattern; first in the
# expanded patterns of a recursive shared nonterminal of the structural route
ANY_PATH = "**"
# item kinds whose every proper prefix has infinitely many completions (so excluding a finite
# set of earlier items never leaves a dead end), except the integer text "0" / "-0", which the
# matcher handles: see unique_items
ITEM_KINDS = ("string", "integer", "number")
# objects whose every proper prefix has infinitely many completions (extra keys stay open
# until the closing brace): the matcher compares completed items as JSON values
OBJECT_KIND = "object"
# any JSON value (an items schema without validation keywords): every proper prefix of an item
# has infinitely many completions but those of ``true``/``false``/``null``, which the matcher
# excludes when that literal is already an item; containers are kept as text like objects
ANY_KIND = "any"

# the most paths one shared pattern expands to (its use sites, transitively); past it the
# pattern starts with "**" (any place: coarser, never wrong)
MAX_EXPANDED_PATHS = 64
# the most expansion calls for one shared nonterminal (the use graph of ``$ref``s is walked
# path by path); past it its places are "**"
MAX_EXPANSION_STEPS = 512


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RefSite:
    """The first segment of the paths recorded inside a shared nonterminal: any place the
    nonterminal ``key`` is used at (:meth:`UniqueItemsPlan.check` expands it)."""

    key: object


class _TooManyUses(Exception):
    """The use chains of a shared nonterminal branch past ``MAX_EXPANSION_STEPS``."""


@dataclass(frozen=True, slots=True)
class _Turn:
    """While expanding a cycle of shared nonterminals: the paths that follow are the
    segments one turn through ``key`` adds (`UniqueItemsPlan._prefixes`)."""

    key: object


class Member:
    """The value of the declared property ``name`` of an object schema: objects are written
    with their declared properties in schema order, so the keys before ``name`` in such an
    object include the ``required`` ones and lie within the ``allowed`` ones (the properties
    declared earlier). Two object schemas with a property of the same name are told apart
    at run time by the keys already written (:class:`MemberKey`)."""

    __slots__ = ("_declared", "_index", "_sets", "name")

    def __init__(
        self, declared: Sequence[tuple[str, Any, bool]], index: int, any_order: bool = False
    ) -> None:
        """The member ``declared[index]`` (``(name, schema, is_required)`` in schema order)
        of an object written in that order: ``required`` / ``allowed`` are the required /
        all names declared before it; under ``any_order`` none are required and every other
        declared name is allowed. Built on first use (most members are never compared, and
        building every member's sets up front is quadratic in an object's members)."""
        self.name: str = declared[index][0]
        self._sets: tuple[frozenset[str], frozenset[str]] | None = None
        self._declared = declared
        self._index = -1 if any_order else index

    @property
    def required(self) -> frozenset[str]:
        return self._key_sets()[0]

    @property
    def allowed(self) -> frozenset[str]:
        return self._key_sets()[1]

    def _key_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        sets = self._sets
        if sets is None:
            if self._index < 0:  # any order
                others = frozenset(name for name, _, _ in self._declared if name != self.name)
                sets = self._sets = (frozenset(), others)
            else:
                before = self._declared[: self._index]
                sets = self._sets = (
                    frozenset(name for name, _, is_req in before if is_req),
                    frozenset(name for name, _, _ in before),
                )
            self._declared = ()  # (the schemas need not stay alive for it)
        return sets

    def __getstate__(self) -> tuple[str, tuple[frozenset[str], frozenset[str]]]:
        return self.name, self._key_sets()  # (a pickled plan keeps the sets, not the schemas)

    def __setstate__(self, state: tuple[str, tuple[frozenset[str], frozenset[str]]]) -> None:
        self.name, self._sets = state
        self._declared, self._index = (), 0

    def matches(self, segment: str) -> bool:
        """Is the concrete ``segment`` (a `MemberKey`) this property, after such keys?"""
        before = getattr(segment, "before", None)
        return (
            segment == self.name and before is not None and self.required <= before <= self.allowed
        )

    def meets(self, other: Member) -> bool:
        """Can one concrete key be both (keys before it within both, required by both)?"""
        return self.name == other.name and (self.required | other.required) <= (
            self.allowed & other.allowed
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Member)
            and other.name == self.name
            and other._key_sets() == self._key_sets()
        )

    def __hash__(self) -> int:
        # the name alone (equal members have equal names): a plan's path sets then build the
        # key sets only of members that share a name with another, not of all of them
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Member({self.name!r})"


class KeySpaceLike(Protocol):
    """What a :class:`KeyClass` asks of its object's key space."""

    def is_in_class(self, key: str, hits: tuple[bool, ...]) -> bool: ...


class KeyClass:
    """The values of one object's extra keys of one ``patternProperties`` class: keys that
    are not declared names and match exactly the patterns of ``hits`` (``space``: the
    object's :class:`~formcast.grammar.json_schema.key_classes.KeySpace`). Two classes of
    one object never share a key; a class and anything else are taken to meet."""

    __slots__ = ("_found", "hits", "space")

    def __init__(self, space: KeySpaceLike, hits: tuple[bool, ...]) -> None:
        self.space, self.hits = space, hits
        self._found: dict[str, bool] = {}  # key -> in the class (memo: masks ask often)

    def matches(self, segment: str) -> bool:
        """Is the concrete key ``segment`` in this class?"""
        found = self._found.get(segment)
        if found is None:
            found = self._found[segment] = segment != ELEMENT and self.space.is_in_class(
                segment, self.hits
            )
        return found

    def meets(self, other: Segment) -> bool:
        if other == ELEMENT:
            return False
        if isinstance(other, KeyClass):
            return other.space is not self.space or other.hits == self.hits
        if isinstance(other, Member):
            return self.matches(other.name)
        if isinstance(other, str):
            return self.matches(other)
        return True  # another object's extra keys: co-finite, taken to meet

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyClass) and other.space is self.space and other.hits == self.hits

    def __hash__(self) -> int:
        return hash((id(self.space), self.hits))

    def __repr__(self) -> str:
        return f"KeyClass({self.hits})"


class MemberKey(str):
    """A concrete path segment: an object key, with the keys written before it (``before``)."""

    __slots__ = ("before",)

    def __new__(cls, name: str, before: frozenset[str]) -> MemberKey:
        out = super().__new__(cls, name)
        out.before = before
        return out


# a key, "[]", "**", ("*", excluded keys), a Member, a KeyClass or (first only, before
# expansion) a RefSite
Segment = str | tuple[str, frozenset[str]] | Member | KeyClass | RefSite
Path = tuple[Segment, ...]


_MAX_DEAD_SETS = 64  # used-value sets whose dead prefixes an EnumDomain keeps


def _num_starting(texts: list[bytes] | tuple[bytes, ...], prefix: bytes) -> int:
    """How many of the sorted JSON ``texts`` start with ``prefix`` (UTF-8 never holds the
    byte 0xFF, so they sort below ``prefix + 0xFF``)."""
    return bisect.bisect_left(texts, prefix + b"\xff") - bisect.bisect_left(texts, prefix)


class EnumDomain:
    """The item kind of a unique array of strings from a finite set too large to enumerate
    the arrays of: the values and their exact texts, sorted by text (prefix lookups)."""

    __slots__ = ("texts", "values", "_dead")

    def __init__(self, values: list[str]) -> None:
        pairs = sorted({json.dumps(v, ensure_ascii=False).encode(): v for v in values}.items())
        self.texts: tuple[bytes, ...] = tuple(text for text, _ in pairs)
        self.values: tuple[str, ...] = tuple(value for _, value in pairs)
        self._dead: dict[frozenset, frozenset[bytes]] = {}  # see dead_prefixes

    def dead_prefixes(self, used: frozenset) -> frozenset[bytes]:
        """The proper prefixes of the texts that only used values start with (nonempty,
        ``"`` included): a pending item there can only complete as a repeat.

        Each is a prefix of a used value's text; walked from the longest, a used value's
        prefixes stop being dead at the first one an unused value shares (the shorter ones
        are shared too), so the work is a few sorted-range counts per used value, whatever
        the domain's size. Kept for the last few ``used`` sets (they change only when an
        item completes)."""
        found = self._dead.get(used)
        if found is not None:
            return found
        used_texts = sorted(json.dumps(v, ensure_ascii=False).encode() for v in used)
        dead: set[bytes] = set()
        for text in used_texts:
            for end in range(len(text) - 1, 0, -1):
                prefix = text[:end]
                if prefix in dead:
                    break  # (its shorter prefixes were decided from another value)
                if _num_starting(self.texts, prefix) != _num_starting(used_texts, prefix):
                    break
                dead.add(prefix)
        found = frozenset(dead)
        if len(self._dead) >= _MAX_DEAD_SETS:
            self._dead.pop(next(iter(self._dead)))
        self._dead[used] = found
        return found

    def has_unused(self, prefix: bytes, used: frozenset) -> bool:
        """Is some value whose text starts with ``prefix`` not in ``used``?"""
        i = bisect.bisect_left(self.texts, prefix)
        while i < len(self.texts) and self.texts[i].startswith(prefix):
            if self.values[i] not in used:
                return True
            i += 1
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnumDomain) and other.texts == self.texts

    def __hash__(self) -> int:
        return hash(self.texts)

    def __repr__(self) -> str:
        return f"EnumDomain({len(self.texts)} strings)"


Kind: TypeAlias = "str | EnumDomain | ItemAutomaton"


def may_need_plan(source: str, max_count: int | None = None) -> bool:
    """Could the schema text ``source`` need the matcher's checks (a cache hit skips the
    tree, so the plan is rebuilt only where the keywords occur)? ``max_count``: the largest
    counted repetition the route allows (a plain string bounded past it is counted by the
    matcher). (Counted arrays: `has_items_above`.)"""
    has_bounds = '"maxLength"' in source or '"minLength"' in source
    if '"uniqueItems"' in source:
        return True
    if not has_bounds:
        return False
    if '"pattern"' in source or '"format"' in source:
        return True
    return max_count is not None and any(
        int(bound) > max_count for bound in _LENGTH_BOUND.findall(source)
    )


_LENGTH_BOUND = re.compile(r'"m(?:ax|in)Length":\s*(\d+)')
_MAX_LENGTH = re.compile(r'"maxLength":\s*(\d+)')
_MAX_ITEMS = re.compile(r'"maxItems":\s*(\d+)')


def has_items_above(source: str, count_items_above: int | None) -> bool:
    """Does the schema text ``source`` bound some array past ``count_items_above`` items
    (one the matcher may count; None: none is)?"""
    if count_items_above is None or '"maxItems"' not in source:
        return False
    return any(int(bound) > count_items_above for bound in _MAX_ITEMS.findall(source))


def chained_chars(source: str, max_count: int) -> int:
    """The characters of the bounded strings the schema text ``source`` may write out as
    counted chains: ``maxLength + 1`` for each bound within ``max_count`` (an estimate that
    chooses where the automaton's chains are budgeted, not a bound)."""
    bounds = (int(bound) for bound in _MAX_LENGTH.findall(source))
    return sum(bound + 1 for bound in bounds if bound <= max_count)


def any_key_except(names: list[str]) -> Segment:
    """The segment of extra properties' values: any key but ``names``."""
    return ("*", frozenset(names))


def _segments_meet(a: Segment, b: Segment) -> bool:
    """Can one concrete segment match both ``a`` and ``b``?"""
    if isinstance(a, KeyClass):
        return a.meets(b)
    if isinstance(b, KeyClass):
        return b.meets(a)
    if a == ELEMENT or b == ELEMENT:
        return a == b
    if isinstance(a, Member) and isinstance(b, Member):
        return a.meets(b)
    if isinstance(a, Member) or isinstance(b, Member):
        member, other = (a, b) if isinstance(a, Member) else (b, a)
        assert isinstance(member, Member)
        return _segments_meet(member.name, other)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return True  # two co-finite key sets always share a key
    if isinstance(a, tuple):
        return b not in a[1]
    if isinstance(b, tuple):
        return a not in b[1]
    return a == b


def _segment_matches(pattern: Segment, segment: str) -> bool:
    if isinstance(pattern, Member | KeyClass):
        return pattern.matches(segment)
    if isinstance(pattern, tuple):
        return segment != ELEMENT and segment not in pattern[1]
    return pattern == segment


def paths_meet(first: Path, second: Path) -> bool:
    """Can one concrete path match both patterns (``"**"``: any run of segments)?"""
    if ANY_PATH not in first and ANY_PATH not in second:  # segment by segment
        return len(first) == len(second) and all(map(_segments_meet, first, second))

    @functools.cache
    def meet(i: int, j: int) -> bool:
        if i < len(first) and first[i] == ANY_PATH:
            return meet(i + 1, j) or (j < len(second) and meet(i, j + 1))
        if j < len(second) and second[j] == ANY_PATH:
            return meet(i, j + 1) or (i < len(first) and meet(i + 1, j))
        if i == len(first) or j == len(second):
            return i == len(first) and j == len(second)
        return _segments_meet(first[i], second[j]) and meet(i + 1, j + 1)

    return meet(0, 0)


def path_matches(pattern: Path, path: tuple[str, ...]) -> bool:
    """Does the concrete ``path`` (keys and ``"[]"``) match the pattern (``"**"``: any run
    of segments)?"""
    return len(pattern) in pattern_positions(pattern, path)


def pattern_positions(pattern: Path, path: tuple[str, ...]) -> set[int]:
    """The positions in ``pattern`` that matching the concrete ``path`` can reach (an NFA
    over segments: ``"**"`` loops on any segment and may be skipped)."""

    def closure(positions: set[int]) -> set[int]:
        for position in sorted(positions):
            while position < len(pattern) and pattern[position] == ANY_PATH:
                position += 1
                positions.add(position)
        return positions

    positions = closure({0})
    for segment in path:
        after = set()
        for position in positions:
            if position == len(pattern):
                continue
            if pattern[position] == ANY_PATH:
                after.add(position)
            elif _segment_matches(pattern[position], segment):
                after.add(position + 1)
        if not after:
            return after
        positions = closure(after)
    return positions


def _reads_items(kind: Kind) -> bool:
    """Does the matcher keep this kind's items as one text (an `ItemAutomaton`, an open
    object, any value), so that no guarded array may sit inside them?"""
    return kind in (OBJECT_KIND, ANY_KIND) or not isinstance(kind, str | EnumDomain)


def _ignores_inside(kind: Kind) -> bool:
    """Does the matcher apply no guard inside this kind's items (any value: no schema inside
    to guard; an `ItemAutomaton`'s items may hold a guarded array, refused instead)?"""
    return kind == ANY_KIND


def _shown(path: Path) -> str:
    shown = [seg if isinstance(seg, str) else getattr(seg, "name", "*") for seg in path]
    return "/".join(shown) or "(root)"


class CountedClash(SchemaError):
    """A string length the matcher was to count for compile time alone sits where another
    string schema writes too: the compile is to be run again with those bounds built into
    the automaton (`UniqueItemsPlan.uncounted_keys`); a ``SchemaError`` where it is not."""


def build_checked(build: Callable[[], T], plan: UniqueItemsPlan | None, lenient: bool) -> T:
    """``build()`` (a compile of the whole document recording into ``plan``), then
    ``plan.check``; while the check finds a clash it can settle by building products instead
    of counts (:class:`CountedClash`), the plan is reset and the document built again."""
    while True:
        built = build()
        if plan is None:
            return built
        try:
            plan.check(lenient=lenient)
        except CountedClash:  # again, with those strings' bounds in the automata
            plan.reset()
            continue
        return built


class UniqueItemsPlan:
    """What one compile recorded: unique-array patterns, other array sources, the path now.

    Attributes
    ----------
    path : list of str
        The instance path of the value being compiled (maintained by the compiler).
    unique : dict
        ``{path pattern: (item kind, JSON pointer)}`` of the arrays the matcher must guard.
    """

    def __init__(self) -> None:
        self.path: list[Segment] = []
        self.unique: dict[Path, tuple[Kind, str]] = {}
        self._others: set[Path] = set()
        # {shared nonterminal key: the paths it is used at} (paths may start with a RefSite)
        self._sites: dict[object, set[Path]] = {}
        self._prefix_memo: dict[object, list[Path]] = {}  # (filled by check: sites final)
        # _prefixes of the nonterminals whose walk up met no cycle (valid in any context)
        self._acyclic_memo: dict[object, list[Path]] = {}
        self._num_steps = 0
        self._num_turns = 0  # cycles met by _prefixes so far
        # strings whose length bounds the matcher counts: {path: (guard, pointer, keyword)},
        # and the places every other string schema writes strings at
        self.text_guards: dict[Path, tuple[LengthGuard, str, str]] = {}
        self._strings: set[Path] = set()
        self._route_guards: set[LengthGuard] = set()  # note_text_guard(is_route_choice=True)
        # arrays whose maxItems the matcher counts: {path: (max_items, pointer)}
        self.item_counts: dict[Path, tuple[int, str]] = {}
        # > 0 while compiling a language that gets complemented (complement.spec_semantics):
        # a guard cannot be exact there (dropping uniqueItems would grow what is subtracted)
        self.num_negations = 0
        self.is_filled = False
        # guards the matcher was given for cost alone: {guard: its compiler key}; and the
        # keys whose guards clashed, built as product automata instead (kept by reset)
        self._optional_guards: dict[LengthGuard, tuple] = {}
        self.uncounted_keys: set[tuple] = set()

    def reset(self) -> None:
        """Forget everything (a new compile of the same document) but which length guards
        were given up for their products (``uncounted_keys``)."""
        uncounted = self.uncounted_keys
        self.__init__()
        self.uncounted_keys = uncounted

    def note_unique(self, kind: Kind, pointer: str) -> None:
        """The array at the current path is ``uniqueItems`` over items of ``kind``."""
        self._note_unique_at(tuple(self.path), kind, pointer)

    def _note_unique_at(self, path: Path, kind: Kind, pointer: str) -> None:
        found = self.unique.get(path)
        if found is not None and found[0] != kind:
            raise SchemaError(
                f"uniqueItems arrays with {found[0]} items and with {kind} items at the same "
                "place in the output cannot be told apart",
                pointer=pointer,
                keyword="uniqueItems",
            )
        self.unique[path] = (kind, pointer)

    def note_ref_use(self, key: object) -> None:
        """The shared nonterminal ``key`` is used at the current path."""
        self._sites.setdefault(key, set()).add(tuple(self.path))

    @contextlib.contextmanager
    def shared(self, key: object) -> Iterator[None]:
        """Record what is compiled inside as found at every use of the shared nonterminal
        ``key`` (`note_ref_use`)."""
        saved = self.path
        self.path = [RefSite(key)]
        try:
            yield
        finally:
            self.path = saved

    def note_array(self) -> None:
        """A plain (not unique) array schema at the current path (not inside a complemented
        language: those are subtracted, never written)."""
        if self.num_negations == 0:
            self._others.add(tuple(self.path))

    def note_string(self) -> None:
        """A string schema (or string literal) at the current path."""
        if self.num_negations == 0:
            self._strings.add(tuple(self.path))

    @property
    def has_route_guards(self) -> bool:
        """Were bounds left to the matcher that the structural path would count itself?"""
        return bool(self._route_guards or self.item_counts)

    def note_item_count(self, max_items: int, pointer: str) -> None:
        """The array at the current path has its ``maxItems`` counted by the matcher (a
        route choice: the structural path holds the bound in its grammar, so a clash makes
        :meth:`check` raise ``CompileBudgetError``). Two counts at one place clash unless
        equal."""
        path = tuple(self.path)
        found = self.item_counts.get(path)
        if found is not None and found[0] != max_items:
            self._others.add(path)  # two bounds at one place: they clash
        self.item_counts[path] = (max_items, pointer)

    def note_text_guard(
        self,
        guard: LengthGuard,
        pointer: str,
        keyword: str,
        is_route_choice: bool = False,
        optional_key: tuple | None = None,
    ) -> None:
        """The strings at the current path have their length counted by the matcher
        (``is_route_choice``: the structural path would count them in its grammar, so a
        clash makes :meth:`check` raise ``CompileBudgetError``, which takes that path;
        ``optional_key``: the automaton could hold the bounds as a product, the count only
        saves compile time, so a clash makes :meth:`check` raise :class:`CountedClash`,
        whose keys the next compile builds as products)."""
        path = tuple(self.path)
        if is_route_choice:
            self._route_guards.add(guard)
        if optional_key is not None:
            self._optional_guards[guard] = optional_key
        if path in self.text_guards and self.text_guards[path][0] is not guard:
            self._strings.add(path)  # two guarded schemas at one place: they clash
        self.text_guards[path] = (guard, pointer, keyword)

    def note_values_below(self) -> None:
        """Values that may hold arrays anywhere at or below the current path."""
        if self.num_negations == 0:
            self._others.add((*self.path, ANY_PATH))

    def check(self, lenient: bool = False) -> None:
        """Refuse a unique-array pattern that another array source can also write at
        (``lenient``: drop its guard with a warning instead; the language is then a superset).

        Raises
        ------
        SchemaError
            Naming the ``uniqueItems`` keyword and its pointer.
        """
        self.is_filled = True
        self._expand_sites()
        dropped = []
        unique_paths = list(self.unique)
        for i, path in enumerate(unique_paths):
            kind, pointer = self.unique[path]
            clash = [other for other in self._others if paths_meet(path, other)]
            clash += [
                other
                for other in unique_paths[i + 1 :]
                if self.unique[other][0] != kind and paths_meet(path, other)
            ]
            # the matcher reads the items of an ItemAutomaton array (an open object, any
            # value) as one text: no guarded array may sit inside them. Inside an any-value
            # item it applies no guard at all (no schema sits there), so only patterns that
            # also match elsewhere (a recursive nonterminal's "**") meet there: not refused
            clash += [
                other
                for other, (other_kind, _) in self.unique.items()
                if other != path
                and (
                    (
                        _reads_items(kind)
                        and not _ignores_inside(kind)
                        and paths_meet(other, (*path, ELEMENT, ANY_PATH))
                    )
                    or (
                        _reads_items(other_kind)
                        and not _ignores_inside(other_kind)
                        and paths_meet(path, (*other, ELEMENT, ANY_PATH))
                    )
                )
            ]
            if not clash:
                continue
            message = (
                f"uniqueItems over {kind} items where other schemas can also write arrays (at "
                f"output path {_shown(path)}): the matcher could not tell them apart"
            )
            if not lenient:
                raise SchemaError(message, pointer=pointer, keyword="uniqueItems")
            warnings.warn(f"{message} ({pointer or '#'}): uniqueItems dropped", stacklevel=2)
            dropped.append(path)
        for path in dropped:
            del self.unique[path]
        self._check_text_guards(lenient)
        self._check_item_counts()

    def _check_item_counts(self) -> None:
        """Send a counted array that the matcher could confuse with another array schema's
        (or could not see: inside an item it reads as one text) to the structural path."""
        counted = list(self.item_counts)
        for i, path in enumerate(counted):
            max_items, pointer = self.item_counts[path]
            clash = [other for other in self._others if paths_meet(path, other)]
            clash += [other for other in self.unique if paths_meet(path, other)]
            clash += [
                other
                for other in counted[i + 1 :]
                if self.item_counts[other][0] != max_items and paths_meet(path, other)
            ]
            clash += [
                other
                for other, (kind, _) in self.unique.items()
                if _reads_items(kind) and paths_meet(path, (*other, ELEMENT, ANY_PATH))
            ]
            if clash:
                raise CompileBudgetError(
                    f"maxItems counted by the matcher where other schemas can also write "
                    f"arrays (at output path {_shown(path)}, {pointer or '#'}): the matcher "
                    "could not tell them apart"
                )

    def _check_text_guards(self, lenient: bool) -> None:
        """Refuse a counted string that another string schema can also write at."""
        guarded = list(self.text_guards)
        dropped = []
        for i, path in enumerate(guarded):
            guard, pointer, keyword = self.text_guards[path]
            clash = [other for other in self._strings if paths_meet(path, other)]
            clash += [other for other in self._others if other[-1:] == (ANY_PATH,)
                      and paths_meet(path, other)]  # fmt: skip
            clash += [
                other
                for other in guarded[i + 1 :]
                if self.text_guards[other][0] is not guard and paths_meet(path, other)
            ]
            if not clash:
                continue
            message = (
                f"{keyword} counted by the matcher where other schemas can also write strings "
                f"(at output path {_shown(path)}): the matcher could not tell them apart"
            )
            if guard in self._route_guards or any(
                self.text_guards[other][0] in self._route_guards
                for other in clash
                if other in self.text_guards
            ):
                raise CompileBudgetError(f"{message} ({pointer or '#'})")
            guards = [guard, *(self.text_guards[o][0] for o in clash if o in self.text_guards)]
            keys = {self._optional_guards[g] for g in guards if g in self._optional_guards}
            if keys - self.uncounted_keys:
                self.uncounted_keys |= keys
                raise CountedClash(message, pointer=pointer, keyword=keyword)
            if not lenient:
                raise SchemaError(message, pointer=pointer, keyword=keyword)
            warnings.warn(f"{message} ({pointer or '#'}): {keyword} dropped", stacklevel=2)
            dropped.append(path)
        for path in dropped:
            del self.text_guards[path]

    def _expand_sites(self) -> None:
        """Replace each leading RefSite by the paths its nonterminal is used at (a use
        inside itself, or too many uses: ``"**"``)."""
        unique, others = self.unique, self._others
        self.unique, self._others = {}, set()
        for path, (kind, pointer) in unique.items():
            for found in self._expanded(path):
                self._note_unique_at(found, kind, pointer)
        for path in others:
            self._others.update(self._expanded(path))
        guards, strings = self.text_guards, self._strings
        self.text_guards, self._strings = {}, set()
        for path, record in guards.items():
            for found in self._expanded(path):
                if found in self.text_guards and self.text_guards[found][0] is not record[0]:
                    strings.add(found)  # one schema at several places is fine; two clash
                self.text_guards[found] = record
        for path in strings:
            self._strings.update(self._expanded(path))
        counts, self.item_counts = self.item_counts, {}
        for path, record in counts.items():
            for found in self._expanded(path):
                if found in self.item_counts and self.item_counts[found][0] != record[0]:
                    self._others.add(found)  # two bounds at one place clash
                self.item_counts[found] = record

    def _expanded(self, path: Path) -> list[Path]:
        if not path or not isinstance(path[0], RefSite):
            return [path]
        key = path[0].key
        if key not in self._prefix_memo:
            self._num_steps = 0
            try:
                self._prefix_memo[key] = self._prefixes(key, frozenset())
            except _TooManyUses:
                self._prefix_memo[key] = [(ANY_PATH,)]
        return [(*prefix, *path[1:]) for prefix in self._prefix_memo[key]]

    def _prefixes(self, key: object, visiting: frozenset) -> list[Path]:
        """The paths the shared nonterminal ``key`` is used at. A use nested inside a
        nonterminal of ``visiting`` (a cycle) comes back as ``(_Turn(outer), *segments)``:
        the segments one turn adds. With entries ``E`` (the uses off the cycle) and turns
        ``C``, the uses are ``E`` and ``E + "**" + C`` (any turns, the last one written
        out): every concrete path matches one of them. Past ``MAX_EXPANDED_PATHS`` paths
        at one level or ``MAX_EXPANSION_STEPS`` calls in all (use chains branch: a DAG of
        ``$ref``s has exponentially many), ``("**",)``: any place, coarser, never wrong."""
        self._num_steps += 1
        if self._num_steps > MAX_EXPANSION_STEPS:
            raise _TooManyUses
        if key in visiting:
            self._num_turns += 1
            return [(_Turn(key),)]
        # a walk up from ``key`` that met no cycle (no turn anywhere) reached no nonterminal
        # below ``key`` (that would close a cycle through ``key``): its result holds for any
        # ``visiting`` set, and a DAG of ``$ref``s is walked once per nonterminal, not per path
        known = self._acyclic_memo.get(key)
        if known is not None:
            return known
        num_turns = self._num_turns
        out = self._prefixes_up(key, visiting)
        if self._num_turns == num_turns:
            self._acyclic_memo[key] = out
        return out

    def _prefixes_up(self, key: object, visiting: frozenset) -> list[Path]:
        """:meth:`_prefixes` of ``key`` (not in ``visiting``) from its use sites."""
        found: list[Path] = []
        for site in self._sites.get(key, ()):
            if site and isinstance(site[0], RefSite):
                found += [
                    (*prefix, *site[1:]) for prefix in self._prefixes(site[0].key, visiting | {key})
                ]
            else:
                found.append(site)
            if len(found) > MAX_EXPANDED_PATHS:
                return [(ANY_PATH,)]
        turns = [path[1:] for path in found if path[:1] == (_Turn(key),)]
        entries = [path for path in found if path[:1] != (_Turn(key),)]
        out = entries + [(*entry, ANY_PATH, *turn) for entry in entries for turn in turns]
        if len(out) > MAX_EXPANDED_PATHS:
            return [(ANY_PATH,)]
        return out

    def text_patterns(self) -> tuple[tuple[Path, LengthGuard], ...]:
        """``((path pattern, length guard), ...)`` for the run-time grammar."""
        return tuple((path, guard) for path, (guard, _, _) in self.text_guards.items())

    def count_patterns(self) -> tuple[tuple[Path, int], ...]:
        """``((path pattern, maxItems), ...)`` of the counted arrays, for the run-time grammar."""
        return tuple((path, max_items) for path, (max_items, _) in self.item_counts.items())

    @property
    def needs_matcher(self) -> bool:
        """Does the grammar need the matcher's checks (guarded arrays, counted strings or
        counted arrays)?"""
        return bool(self.unique or self.text_guards or self.item_counts)

    def patterns(self) -> tuple[tuple[Path, Kind], ...]:
        """``((path pattern, item kind), ...)`` for the run-time grammar."""
        return tuple((path, kind) for path, (kind, _) in self.unique.items())
