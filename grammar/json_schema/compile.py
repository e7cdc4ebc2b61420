"""JSON Schema, pydantic models and Python types -> one exact regular expression -> grammar.

The schema compiler builds a regex syntax tree whose language is exactly the set of JSON
texts, *written in formcast's output layout*, that validate against the schema; the tree goes
to the automaton builder as it is (:func:`~formcast.grammar.index.compile.compile_tree`).
``json_schema_to_regex(schema)`` prints it as a Python-dialect regex for other tools.

Output layout (what a constrained generation writes):

- Objects: properties in the schema's ``properties`` order; required ones always present,
  optional ones may be omitted; extra properties (where allowed) after the declared ones, with
  keys different from every declared name. ``strict=True`` (default) treats an absent
  ``additionalProperties`` as ``false`` on schemas that describe objects (like OpenAI's strict
  mode); ``strict=False`` follows the specification (absent = any extra property).
  Inside ``allOf`` branches, absent ``additionalProperties`` stays open (strict applies to the
  merged result). Duplicate keys among extra properties are not excluded.
- Whitespace (``schema_layout``): ``whitespace="compact"`` (default) allows one optional space
  after each ``,`` and ``:`` and nowhere else; ``"none"`` allows none; ``"flexible"`` allows up
  to ``max_whitespace`` JSON whitespace characters at each structural position (after ``{ [``,
  before ``} ]``, around ``,`` and ``:``); ``indent=N`` is exactly ``json.dumps(v, indent=N)``.
  Whitespace can never run away.
- Strings: exactly ``json.dumps(s, ensure_ascii=False)``: characters raw except ``\\"``,
  ``\\\\``, ``\\b \\f \\n \\r \\t`` and ``\\u00xx`` (lowercase) for other C0 controls; no
  surrogates. One spelling per string, so ``minLength``/``maxLength`` count characters.
  With a ``pattern`` whose variable parts cannot absorb the bounds (e.g. ``^[a-z]+\\.[a-z]+$``
  with ``maxLength``), the string is ``"(?:(?=(?:CHAR){m,n}")(?:PATTERN)")``: a lookahead that
  formcast builds as the product of the pattern automaton with a character counter (exact;
  ``SchemaError`` on ``maxLength`` when the product exceeds ``GUARD_MAX_STATES``).
- Integers: JSON integer literals (``-0`` allowed; no ``1.0`` or ``1e2`` although jsonschema
  calls those integers). Numbers: the full JSON number grammar when unbounded; with bounds or
  ``multipleOf``, decimals without exponent (value comparison over exponents is not regular).
  ``enum`` / ``const`` numbers compare by value: ``json.dumps``'s text or any text without
  exponent equal to it (``2``, ``2.0``, ``2.00`` for ``enum: [2.0]``; integer literals only
  under ``type: integer``).
- ``true`` / ``{}`` schemas and, under ``strict=False``, undeclared properties (any JSON value)
  nest without bound by default (``max_any_depth=None``). Arbitrary nesting is not regular:
  the regex route writes each container inside such a value as a marker byte and runs the DFA
  as a stack of automata (``AnyValueGrammar``: exact, masks from precomputed rows); the
  structural path (``structural``) nests them as a recursive nonterminal. An int
  ``max_any_depth=N`` bounds them to ``N`` nested containers instead (deeper values are then
  *rejected*); only that form has one plain regex (``json_schema_to_regex``).

Routes (``compile_json_schema(route="auto")``): a schema whose regex has at most
``REGEX_ROUTE_CHARS`` characters (the tree's ``num_chars``) and whose automaton builds within
the budget becomes one byte DFA (fastest masks); recursive or larger schemas take the structural context-free path, where
every ``$ref`` target, every large sub-schema and every string value is a nonterminal of its
own and automata are built per leaf, never for the whole document.

``uniqueItems`` over a small finite item domain is enumerated in the tree; over strings,
unbounded numbers and large string enums (``arrays``) the matcher enforces it
(:class:`~formcast.grammar.json_schema.unique_items.UniqueItemsGrammar`, both routes; not in
``json_schema_to_regex``, which refuses it).

Keywords: see ``compiler`` / ``objects`` / ``arrays`` / ``formats`` for
what is exact and what is refused. A refusal raises ``SchemaError`` naming the keyword and its
JSON pointer; ``lenient=True`` turns each refusal into a ``UserWarning`` and drops that keyword
(the language then is a superset: ``relaxed`` lists what was dropped). A recursive ``$ref``
raises ``SchemaError`` in ``json_schema_to_regex``; ``compile_json_schema`` routes it to the
context-free path. ECMA-262 ``pattern``
semantics are used (ASCII ``\\d``/``\\w``, ``.`` excludes all line terminators, unanchored =
contains a match), parsed by the regex parser's ``ecma`` dialect.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from formcast.errors import CompileBudgetError, SchemaError
from formcast.grammar.automata.budget import DEFAULT_MAX_STATES, compile_deadline
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.index.compile import (
    DEFAULT_EAGER_MAX_STATES,
    compile_tree,
    gc_paused,
    warm_kernels,
)
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.json_schema.any_value.grammar import MARKER_BYTES, AnyValueGrammar
from formcast.grammar.json_schema.compiler import MARKER, SchemaCompiler, has_any_marker
from formcast.grammar.json_schema.keyword_types import has_string_patterns
from formcast.grammar.json_schema.layout import make_layout
from formcast.grammar.json_schema.ref_cycles import has_ref_cycle
from formcast.grammar.json_schema.sources import schema_of
from formcast.grammar.json_schema.structural import compile_json_schema_cfg, is_recursion_error
from formcast.grammar.json_schema.unique_items import UniqueItemsGrammar
from formcast.grammar.json_schema.unique_plan import (
    UniqueItemsPlan,
    build_checked,
    chained_chars,
    has_items_above,
    may_need_plan,
)
from formcast.grammar.regex.syntax_tree import Node, to_python_regex

DEFAULT_MAX_REGEX_CHARS = 4_000_000
# "auto" route: larger schemas take the structural (CFG) path; measured on JSONSchemaBench
# (Kubernetes), regexes of 200k-620k characters determinise and index in 0.7-2 s on one core,
# and their masks cost a table lookup (the structural route's first visits cost ~0.1-1 ms)
REGEX_ROUTE_CHARS = 1_000_000
# the auto route gives up on the regex once its sub-results total this many times
# REGEX_ROUTE_CHARS (Kubernetes schemas that fit build <= 2.3M characters of sub-results; the
# ones that do not build 12M+ characters over ~10 s before passing REGEX_ROUTE_CHARS)
REGEX_ROUTE_BUILT_FACTOR = 3
REGEX_ROUTE_MAX_COUNT = 256  # a larger counted repetition takes the structural path too
# a plain string bounded past REGEX_ROUTE_MAX_COUNT keeps the regex route with its length
# counted by the matcher (length_guard) while the schema's automaton stays within this many
# states; above, the structural path (which holds the bounds in its grammar) compiles it. The
# regex route's compile costs ~8-17 us per DFA state (automaton, index, any-value tables), so
# this keeps such schemas near the 100 ms compile target; the structural route's first
# visits cost ~0.1-0.5 ms at each object member (issue 24)
GUARDED_ROUTE_MAX_STATES = 8_000
# bounded strings written out as counted chains (~14 automaton states per character) may take
# this many states together; past it the matcher counts the later ones (a few table reads a
# mask), so the automaton stays within what the index builds eagerly (a DFA past
# DEFAULT_EAGER_MAX_STATES is indexed state by state on first use: ~35-300 us a first visit
# inside a chain, every position a new state)
CHAIN_ROUTE_MAX_STATES = DEFAULT_EAGER_MAX_STATES // 2
# any schema on the auto route: a subset construction past this many DFA states gives up for
# the structural path. Such an automaton is indexed lazily anyway (its masks are first visits
# of ~0.1-0.5 ms, as the structural route's are), and determinising, minimising and indexing
# it costs ~8-17 us a state: an anyOf of 20 objects in an array of up to 4 (73,758 states)
# took 0.8-1.6 s on the regex route, 18-23 ms on the structural one
AUTO_ROUTE_MAX_STATES = 2 * DEFAULT_EAGER_MAX_STATES
CHAIN_STATES_PER_CHAR = 14  # (the estimate that picks the schemas to budget, see chained_chars)
DEFAULT_TIMEOUT_S = 20.0


def reads_marker(dfa: ByteDFA) -> bool:
    """True if some string of ``dfa`` holds the unbounded-value marker byte (a schema DFA
    built from a tree with markers: JSON text never holds a raw C0 control)."""
    marker_class = int(dfa.byte_to_class[MARKER])
    return bool((dfa.transitions[:, marker_class] >= 0).any())


def json_schema_to_regex(
    schema: Any,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int | None = None,
    max_regex_chars: int = DEFAULT_MAX_REGEX_CHARS,
) -> str:
    """Python-dialect regex for the JSON texts (formcast layout) valid against ``schema``.

    Parameters
    ----------
    schema:
        A JSON Schema (dict, bool or JSON string) or a Python type (see ``schema_of``).
    whitespace, max_whitespace, indent, any_order:
        Output layout, see :func:`compile_json_schema`.
    strict:
        Absent ``additionalProperties`` means ``false`` (True) or ``true`` (False).
    lenient:
        Downgrade refusals to warnings (the keyword is dropped, the language grows).
    max_any_depth:
        Nesting bound ``N`` for unconstrained values (``true``/``{}`` schemas; deeper values
        are rejected). ``None`` (default): unbounded, which no regex can express: a schema
        with unconstrained values then raises ``SchemaError`` (``compile_json_schema``
        handles them exactly).
    max_regex_chars:
        Budget on the regex size; beyond it ``CompileBudgetError`` is raised.

    Returns
    -------
    str
        The regex (use with ``re.fullmatch`` or ``compile_regex``). A schema no value satisfies
        raises ``SchemaError``.
    """
    tree = marked_schema_tree(
        schema,
        whitespace=whitespace,
        max_whitespace=max_whitespace,
        indent=indent,
        any_order=any_order,
        strict=strict,
        lenient=lenient,
        max_any_depth=max_any_depth,
        max_regex_chars=max_regex_chars,
        allow_automata=False,
    )
    if has_any_marker(tree):
        raise SchemaError(
            "the schema has unconstrained values (true/{} or undeclared properties), which nest "
            "without bound: no regular expression describes them; pass max_any_depth=N for a "
            "regex that bounds them, or use compile_json_schema",
            pointer="",
        )
    return to_python_regex(tree)


def marked_schema_tree(
    schema: Any,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
    strict: bool = True,
    lenient: bool = False,
    max_any_depth: int | None = None,
    max_regex_chars: int = DEFAULT_MAX_REGEX_CHARS,
    max_built_chars: int | None = None,
    max_shared_chars: int | None = None,
    max_count: int | None = None,
    unique_plan: UniqueItemsPlan | None = None,
    allow_automata: bool = True,
    share_refs: bool = True,
    count_strings_above: int | None = None,
    guarded_max_states: int | None = None,
    count_strings_floor: int | None = None,
    chain_max_states: int | None = None,
    count_items_above: int | None = None,
    items_max_states: int | None = None,
) -> Node:
    """The syntax tree of :func:`json_schema_to_regex`, except that with
    ``max_any_depth=None`` containers in unconstrained values are the marker of
    :func:`~formcast.grammar.json_schema.compiler.any_marker` (for ``AnyValueGrammar``), not
    JSON text. ``max_built_chars`` bounds the regex size of all sub-results together
    (``CompileBudgetError`` past it; the auto route's early exit), ``max_shared_chars`` the
    size a part used at many places (an ``any_order`` object's states) may be written out
    with (``SchemaCompiler.share``), ``max_count`` the largest counted repetition a part may
    hold (``CompileBudgetError`` past it, as soon as the part is built). With ``unique_plan``,
    ``uniqueItems`` arrays over open item kinds are compiled without the keyword and
    recorded there (checked: ``SchemaError`` where the matcher could not enforce them).
    ``allow_automata=False`` keeps every part a regex (no automaton nodes, see
    :class:`~formcast.grammar.regex.syntax_tree.Automaton`). ``share_refs=False`` compiles a
    ``$ref`` target again at each use (needed where ``unique_plan`` records instance paths).
    ``count_strings_above``: a plain string whose ``maxLength`` passes it (at least the
    vocabulary's longest token) keeps an unbounded tail, that bound counted by the matcher
    (recorded in ``unique_plan``), and then every later plain string whose ``maxLength``
    passes ``count_strings_floor`` (at least the most characters a token puts into a string
    it opens), as after ``chain_max_states`` NFA states of bounded strings written out
    (needs ``share_refs=False``: the plan records instance paths); once one is, past
    ``guarded_max_states`` NFA states of bounded strings the build stops
    (``CompileBudgetError``: the structural path). ``count_items_above``: an array whose
    ``maxItems`` passes it (more than any token's commas plus one) and whose written-out
    items would take more than ``items_max_states`` NFA states keeps an unbounded tail, that
    bound counted by the matcher (recorded in ``unique_plan``; needs ``share_refs=False``)."""
    new_compiler = functools.partial(
        SchemaCompiler,
        schema_of(schema),
        layout=make_layout(
            whitespace, max_whitespace=max_whitespace, indent=indent, any_order=any_order
        ),
        strict=strict,
        lenient=lenient,
        max_any_depth=max_any_depth,
        max_regex_chars=max_regex_chars,
        max_built_chars=max_built_chars,
        max_shared_chars=max_shared_chars,
        max_count=max_count,
        unique_plan=unique_plan,
        allow_automata=allow_automata,
        share_refs=share_refs,
        count_strings_above=count_strings_above,
        guarded_max_states=guarded_max_states,
        count_strings_floor=count_strings_floor,
        chain_max_states=chain_max_states,
        count_items_above=count_items_above,
        items_max_states=items_max_states,
    )

    def build() -> Node | None:
        compiler = new_compiler()
        try:
            return compiler.compile(compiler.root, "")
        except RecursionError as exc:
            raise CompileBudgetError("schema nesting too deep for the regex path") from exc

    tree = build_checked(build, unique_plan, lenient)
    if tree is None:
        raise SchemaError("the schema is unsatisfiable: no JSON value validates", pointer="")
    if tree.num_chars > max_regex_chars:
        raise CompileBudgetError(
            f"regex for this schema has {tree.num_chars} characters (budget {max_regex_chars}); "
            "use the structural/CFG path for very large schemas"
        )
    return tree


def compile_json_schema(
    schema: Any,
    vocab: Any,
    *,
    whitespace: str | int | None = "compact",
    max_whitespace: int | None = None,
    indent: int | None = None,
    any_order: bool = False,
    strict: bool = True,
    lenient: bool = False,
    route: str = "auto",
    max_any_depth: int | None = None,
    max_depth: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    regex_route_chars: int = REGEX_ROUTE_CHARS,
    cache: bool = True,
) -> Any:
    """Compile a JSON Schema (or Python type) into a grammar with exact token masks.

    Parameters
    ----------
    schema:
        A dict/bool schema, a JSON string, a pydantic model or any type pydantic's
        ``TypeAdapter`` understands (see :func:`schema_of`). Draft 2020-12 semantics;
        draft-07 spellings (``definitions``, array-form ``items``, ``additionalItems``) too.
    vocab:
        The model's :class:`~formcast.grammar.index.vocabulary.Vocabulary`.
    whitespace:
        Output layout. ``"compact"`` (default; ``None`` means the same): one *optional* single
        space after each ``,`` and ``:``, nowhere else, so both ``json.dumps(v)`` and
        ``json.dumps(v, separators=(",", ":"))`` texts are accepted and the model cannot loop
        on whitespace. ``"none"``: no whitespace at all. ``"spaced"``: exactly
        ``json.dumps(v)``'s ``", "`` and ``": "`` (every space forced, the most text for
        jump-forward to write without sampling). ``"flexible"``: up to
        ``max_whitespace`` JSON whitespace characters (space, tab, LF, CR) after ``{``/``[``,
        before ``}``/``]`` and around ``,``/``:``. An int ``N`` is the older spelling of
        ``"flexible"`` with ``max_whitespace=N`` (``0`` = ``"none"``).
    max_whitespace:
        The bound of ``"flexible"`` (an int >= 1, default 8); only valid with ``"flexible"``.
    indent:
        ``N`` (0..16) selects the pretty layout, exactly ``json.dumps(v, indent=N)``: newline
        plus ``N`` spaces per nesting level before every member and before the closing
        bracket, ``": "`` after keys, empty containers as ``{}``/``[]``. Combine only with the
        default ``whitespace``; refused (``SchemaError``) for recursive schemas.
    any_order:
        ``False`` (default): object members in ``properties`` order. ``True``: in any order,
        each at most once, the required ones present, extra members (where allowed) anywhere
        between them: exact, at the cost of one grammar state per set of members written
        (``2**n`` for ``n`` declared properties; on the structural path one nonterminal per
        set; ``dependentRequired`` is kept exactly). Objects with ``dependentSchemas`` (or
        schema-valued ``dependencies``) or ``minProperties`` / ``maxProperties`` beyond the
        required members are refused (``SchemaError``); ``const`` / ``enum`` objects keep their written order. Under
        ``route="auto"`` a schema with such an object of two or more members takes the
        structural path (``route="regex"`` writes every order out).
    strict:
        ``True`` (default, as OpenAI's strict mode): an absent ``additionalProperties`` on an
        object schema means ``false``. ``False``: the specification's meaning (any extra
        property allowed).
    lenient:
        Downgrade refusals to ``UserWarning`` s (the keyword is dropped; the language grows).
    route:
        ``"auto"`` (default): one byte DFA (regex path: fastest masks) when the schema is not
        recursive, its regex has at most ``regex_route_chars`` characters and no counted
        repetition over ``REGEX_ROUTE_MAX_COUNT`` (a plain string's ``maxLength`` past it, or
        past ``CHAIN_ROUTE_MAX_STATES`` states of bounded strings, is counted by the
        matcher instead), and its automaton builds within half of ``timeout_s``; otherwise
        the structural context-free path
        (``structural``: one nonterminal per ``$ref`` target and per large sub-schema,
        automata per leaf). ``"regex"`` / ``"cfg"`` force one path.
    max_any_depth:
        ``None`` (default): unconstrained values (``true``/``{}`` schemas, undeclared
        properties under ``strict=False``) nest without bound, exactly, on both paths (on
        the regex path the grammar is an ``AnyValueGrammar``: the schema DFA plus one
        automaton frame per nested container; under ``indent`` only the regex path can do
        this). An int ``N``: at most ``N`` nested containers on the regex path (deeper
        values are *rejected*; one plain DFA); the structural path nests them without bound
        except under ``indent``.
    max_depth:
        ``None`` (default): recursive schemas nest without bound. ``N``: output nesting past
        ``N`` levels (the root schema plus each ``$ref`` being expanded) is refused with a
        ``GrammarError`` naming the depth and byte offset (see ``compile_json_schema_cfg``).
        The bound is enforced on the structural path, so ``route="auto"`` takes that path when
        it is set, and ``route="regex"`` with ``max_depth`` is a ``SchemaError``.
    timeout_s:
        Compile budget in wall-clock seconds, both paths included (the regex path's automaton
        gets half of it under ``route="auto"``): ``CompileBudgetError`` beyond it.
    regex_route_chars:
        Regex size above which ``"auto"`` takes the structural path.
    cache:
        Reuse compiled grammars (keyed by schema, options and vocabulary).

    Returns
    -------
    CompiledGrammar, AnyValueGrammar, CompiledCFG or UniqueItemsGrammar
        All offer ``matcher()`` with the same cursor API (the last wraps one of the others
        when the matcher keeps ``uniqueItems`` arrays distinct).

    Raises
    ------
    SchemaError
        An unsupported keyword (naming it and its JSON pointer), an unsatisfiable schema, or a
        bad layout option.
    CompileBudgetError
        ``route="regex"`` and the budget is exceeded.
    """

    warm_kernels(vocab)  # numba's one-off load/JIT is not compile time (before the clock)
    # gc_paused: automata and syntax trees make no reference cycles (see there)
    with gc_paused(), compile_deadline(timeout_s):
        return _compile_json_schema(
            schema,
            vocab,
            whitespace=whitespace,
            max_whitespace=max_whitespace,
            indent=indent,
            any_order=any_order,
            strict=strict,
            lenient=lenient,
            route=route,
            max_any_depth=max_any_depth,
            max_depth=max_depth,
            timeout_s=timeout_s,
            regex_route_chars=regex_route_chars,
            cache=cache,
        )


def _compile_json_schema(
    schema: Any,
    vocab: Any,
    *,
    whitespace: str | int | None,
    max_whitespace: int | None,
    indent: int | None,
    any_order: bool,
    strict: bool,
    lenient: bool,
    route: str,
    max_any_depth: int | None,
    max_depth: int | None,
    timeout_s: float,
    regex_route_chars: int,
    cache: bool,
) -> Any:

    if route not in ("auto", "regex", "cfg"):
        raise SchemaError(f"route must be 'auto', 'regex' or 'cfg', got {route!r}")
    root = schema_of(schema)
    layout_options = {
        "whitespace": whitespace,
        "max_whitespace": max_whitespace,
        "indent": indent,
        "any_order": any_order,
    }
    make_layout(**layout_options)  # validate the layout before any work
    if max_depth is not None and route == "regex":
        raise SchemaError("max_depth is enforced on the structural path only: use route='auto'")

    def structural() -> Any:

        return compile_json_schema_cfg(
            root,
            vocab,
            strict=strict,
            lenient=lenient,
            max_any_depth=max_any_depth,
            max_depth=max_depth,
            cache=cache,
            **layout_options,
        )

    if route == "cfg" or max_depth is not None:
        return structural()
    is_auto = route == "auto"

    # uniqueItems over open item kinds: recorded while the tree is built, enforced by the
    # matcher (unique_items); on a cache hit the tree is not built, so it is built here
    # for the plan alone when the document has the keyword at all
    plan = UniqueItemsPlan()
    source = json.dumps(root, sort_keys=True, ensure_ascii=False)
    # plain strings bounded past the counter keep the regex route, their maxLength counted
    # by the matcher, where no token can pass that bound within itself; once one is, every
    # later one longer than what a token can put into a string it opens
    count_strings_above = count_strings_floor = count_items_above = None
    if is_auto:
        table = vocab_table(vocab)
        count_strings_above = max(REGEX_ROUTE_MAX_COUNT, int(table.lengths.max(initial=0)))
        count_strings_floor = min(table.max_chars_after_quote(), count_strings_above)
        # arrays bounded past what a token can add to one (its commas) keep an unbounded
        # tail where their written-out items would pass the chain budget: the matcher counts
        count_items_above = table.max_commas() + 1

    # the matcher may count strings (a plan then records instance paths: no shared $refs)
    # where the keywords ask for it or where the chains may pass CHAIN_ROUTE_MAX_STATES; not
    # beside patterns and formats, whose automata's cost the state budgets do not see (a
    # union of hostname / ipv4 / ipv6 determinises in ~0.1 s: such schemas keep the
    # structural path the chains send them to), unless arrays may be counted: the matcher
    # is in play then, and a bounded repetition of items holds each chain many times over
    max_count = REGEX_ROUTE_MAX_COUNT if is_auto else None
    may_count_items = is_auto and has_items_above(source, count_items_above)
    is_chain_heavy = (
        is_auto
        and chained_chars(source, REGEX_ROUTE_MAX_COUNT) * CHAIN_STATES_PER_CHAR
        > CHAIN_ROUTE_MAX_STATES
        and (may_count_items or not has_string_patterns(root))
    )
    needs_plan = is_chain_heavy or may_count_items or may_need_plan(source, max_count)

    def make_tree() -> Node:
        plan.reset()
        tree = marked_schema_tree(
            root,
            unique_plan=plan,
            strict=strict,
            lenient=lenient,
            max_any_depth=max_any_depth,
            max_regex_chars=regex_route_chars if is_auto else DEFAULT_MAX_REGEX_CHARS,
            max_built_chars=REGEX_ROUTE_BUILT_FACTOR * regex_route_chars if is_auto else None,
            # an any_order object written out per path costs far more automaton than its
            # nonterminals do (3 members: ~95 ms vs ~4 ms): the auto route takes the
            # structural path for it
            max_shared_chars=0 if is_auto else None,
            # e.g. maxLength 4096: ~14 DFA states per counted character (raised as soon as the
            # part holding it is built, not after the whole document)
            max_count=REGEX_ROUTE_MAX_COUNT if is_auto else None,
            share_refs=not needs_plan,
            count_strings_above=count_strings_above,
            guarded_max_states=GUARDED_ROUTE_MAX_STATES if is_auto else None,
            count_strings_floor=count_strings_floor,
            chain_max_states=CHAIN_ROUTE_MAX_STATES if is_chain_heavy else None,
            count_items_above=count_items_above,
            items_max_states=CHAIN_ROUTE_MAX_STATES if is_auto else None,
            **layout_options,
        )
        return tree

    options = {
        "layout": make_layout(**layout_options).key(),
        "strict": strict,
        "schema_lenient": lenient,
        "max_any_depth": max_any_depth,
        "route": route,
        "regex_route_chars": regex_route_chars if is_auto else None,
    }
    if is_auto and has_ref_cycle(root, strict=strict, max_any_depth=max_any_depth):
        # recursive: no regular expression describes it, and the regex route would find that
        # out only when its build reaches the cycle. A cycle the compiler never follows (the
        # scan over-approximates) leaves the structural route's refusal to the regex route
        try:
            return structural()
        except (SchemaError, CompileBudgetError):
            pass
    try:
        grammar = compile_tree(
            make_tree,
            vocab,
            kind="json_schema",
            source=source,
            options=options,
            timeout_s=timeout_s / 2 if is_auto else timeout_s,
            cache=cache,
            marker_bytes=MARKER_BYTES,
            max_states=lambda: GUARDED_ROUTE_MAX_STATES if plan.has_route_guards else None,
            unguarded_max_states=AUTO_ROUTE_MAX_STATES if is_auto else DEFAULT_MAX_STATES,
        )
    except CompileBudgetError:
        if route == "regex":
            raise
        return structural()
    except SchemaError as exc:
        # a recursive $ref is not regular: the context-free path unrolls it without bound
        if route == "regex" or not is_recursion_error(exc):
            raise
        return structural()
    if reads_marker(grammar.dfa):
        grammar = AnyValueGrammar(grammar, make_layout(**layout_options))
    if not plan.is_filled and needs_plan:
        make_tree()
    if plan.needs_matcher:
        return UniqueItemsGrammar(
            grammar, plan.patterns(), plan.text_patterns(), plan.count_patterns()
        )
    return grammar


def compile_type(tp: Any, vocab: Any, **kwargs: Any) -> Any:
    """``compile_json_schema(schema_of(tp), vocab, **kwargs)`` for a Python type."""
    return compile_json_schema(schema_of(tp), vocab, **kwargs)


def parse_as(text: str, tp: Any) -> Any:
    """Parse generated JSON ``text`` back into ``tp`` (a pydantic model or any type)."""
    from pydantic import BaseModel, TypeAdapter

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_validate_json(text)
    return TypeAdapter(tp).validate_json(text)
