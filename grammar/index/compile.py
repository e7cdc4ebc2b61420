"""compile_regex / compile_choice / compile_tree: text or tree -> byte DFA -> token index ->
CompiledGrammar (cached).

The pipeline is parse (dialect-aware) -> strip end anchors -> Thompson NFA over UTF-8 bytes ->
subset construction over byte classes -> trim -> Hopcroft minimisation -> token index (ahead
of use when the DFA has at most ``eager_max_states`` states: at compile time for as long as
the automaton took to build, the rest by a background thread; lazy per state otherwise). A pattern that
is one counted repetition of a prefix code (a JSON string chunk) is built directly as a chain
of DFA copies. The per-state loops are numba kernels (:mod:`~formcast.grammar.automata.kernels`,
:mod:`~formcast.grammar.index.kernels`); :func:`warm_kernels` loads them before any budget clock starts. The lower
stages are public for grammars that build one large expression themselves as a syntax tree
(JSON Schema): :func:`compile_tree`, :func:`regex_to_dfa` (text or tree), :func:`compile_dfa`,
:func:`regex_to_python`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from formcast.errors import CompileBudgetError, GrammarError
from formcast.grammar import caches
from formcast.grammar.automata.budget import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    CompileBudget,
    gc_paused,
)
from formcast.grammar.automata.byte_dfa import ByteDFA, determinize, restrict_bytes
from formcast.grammar.automata.literal_dfa import literal_dfa
from formcast.grammar.automata.minimizer import minimize
from formcast.grammar.automata.nfa_builder import build_nfa, counted_chain_dfa, framed_automaton_dfa
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.grammar_cache import GRAMMAR_CACHE, cache_key
from formcast.grammar.index.token_index import AHEAD_MAX_S, TokenIndex, vocab_table
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.regex.parser import parse_regex
from formcast.grammar.regex.syntax_tree import (
    Alternation,
    CharSet,
    Concat,
    Node,
    search_form,
    strip_anchors,
    to_python_regex,
)

DEFAULT_EAGER_MAX_STATES = 8192  # (distinct rows are stored once: JSON-schema DFAs have few)


# regex_to_dfa results by (pattern or tree, dialect, max_states): DFAs are immutable, and
# grammars built from many leaf trees (the structural JSON Schema path) repeat the same leaves
# (string formats, numbers, key sets) within one schema and across schemas
_DFA_MEMO: OrderedDict[tuple[str | Node, str, int], ByteDFA] = OrderedDict()
_DFA_MEMO_LOCK = threading.Lock()
_DFA_MEMO_SIZE = 1024
# table cells of one kept DFA (4 MB; a 256-character JSON string chunk is ~133k cells and
# every schema with long strings on the structural route uses it) and of all kept DFAs
# together (64 MB)
_DFA_MEMO_MAX_CELLS = 1_000_000
# trees over this regex size are not memoised: the memo is for the leaves grammars share
# (strings, numbers, key sets); a whole schema's tree is cached as a grammar instead, and
# as a key it would keep every node alive (work for each full garbage collection)
_DFA_MEMO_MAX_TREE_CHARS = 20_000
_DFA_MEMO_TOTAL_CELLS = 16_000_000
_memo_cells = 0
_is_warm = False
_WARM_LOCK = threading.Lock()


def warm_kernels(vocab: Vocabulary) -> None:
    """Load (or, on a cold numba cache, compile) the automaton and token-index kernels now.

    The first call in a process costs ~0.5 s with a warm on-disk cache and tens of seconds
    on a cold one (a fresh checkout); later calls return at once. Compile entry points call
    it before their budget clocks start, so that one-off cost never counts as compile time
    against ``timeout_s``.
    """
    global _is_warm
    if _is_warm:
        return
    with _WARM_LOCK:
        if not _is_warm:
            budget = CompileBudget(timeout_s=1e9)
            dfa = minimize(
                determinize(build_nfa(parse_regex("a[bc]{0,4}"), budget), budget), budget
            )
            index = TokenIndex(dfa, vocab, is_eager=True)
            index.build_eager(budget)
            index.transitions(dfa.start_state)  # the sparse-transition trie walk
            _is_warm = True


def clear_dfa_memo() -> None:
    """Forget every memoised :func:`regex_to_dfa` result (registered in :mod:`caches` as
    ``"index.regex_to_dfa"``; the lexer walks shared through those DFAs are a memo of their
    own, ``"cfg.walks.shared_walks"``)."""
    global _memo_cells
    with _DFA_MEMO_LOCK:
        _DFA_MEMO.clear()
        _memo_cells = 0


def regex_to_dfa(
    pattern: str | Node,
    *,
    dialect: str = "python",
    max_states: int = DEFAULT_MAX_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_nfa_states: int | None = None,
) -> ByteDFA:
    """The minimal byte-level DFA of the strings that fullmatch ``pattern`` (memoised).

    ``pattern`` is regex text in ``dialect`` or a syntax tree (dialect-free; built by a
    grammar such as JSON Schema, see :mod:`~formcast.grammar.regex.combinators`).

    Raises
    ------
    GrammarError
        Malformed or unsupported pattern (with its position), or an empty language.
    CompileBudgetError
        More than ``max_states`` DFA states or ``timeout_s`` seconds, or an NFA of more
        than ``max_nfa_states`` states (None: no such bound) to determinise.
    """
    is_tree = not isinstance(pattern, str)
    key = (pattern, "tree" if is_tree else dialect, max_states, max_nfa_states)
    is_memoised = not is_tree or pattern.num_chars <= _DFA_MEMO_MAX_TREE_CHARS  # type: ignore[union-attr]
    with _DFA_MEMO_LOCK:
        found = _DFA_MEMO.get(key) if is_memoised else None
        if found is not None:
            _DFA_MEMO.move_to_end(key)
            return found
    node = strip_anchors(pattern if is_tree else parse_regex(pattern, dialect))  # type: ignore[arg-type]
    # a literal with optional layout bytes (most terminals of a JSON-Schema grammar): minimal
    # as built, in a few Python steps per byte (no budget, no collector pause needed)
    dfa = literal_dfa(node)
    if dfa is None or dfa.num_states > max_states:
        budget = CompileBudget(max_states=max_states, timeout_s=timeout_s)
        if max_nfa_states is not None:  # checked as the NFA grows (nfa_builder.build_nfa)
            budget.max_nfa_states = budget.max_determinized_nfa_states = max_nfa_states
        with gc_paused():
            try:
                dfa = _node_to_dfa(node, budget)
            except RecursionError:
                raise GrammarError(
                    "regex groups nested too deeply to build an automaton (Python's recursion "
                    "limit)"
                ) from None
    if is_memoised and dfa.transitions.size <= _DFA_MEMO_MAX_CELLS:
        _remember(key, dfa)
    return dfa


def _remember(key: tuple[str | Node, str, int, int | None], dfa: ByteDFA) -> None:
    global _memo_cells
    with _DFA_MEMO_LOCK:
        old = _DFA_MEMO.pop(key, None)
        if old is not None:
            _memo_cells -= old.transitions.size
        _DFA_MEMO[key] = dfa
        _memo_cells += dfa.transitions.size
        while len(_DFA_MEMO) > _DFA_MEMO_SIZE or _memo_cells > _DFA_MEMO_TOTAL_CELLS:
            _, dropped = _DFA_MEMO.popitem(last=False)
            _memo_cells -= dropped.transitions.size


def _node_to_dfa(node: Node, budget: CompileBudget) -> ByteDFA:
    # a counted repetition of a prefix code (JSON string chunks) is already deterministic
    dfa = counted_chain_dfa(node, budget)
    if dfa is not None and dfa.walk_keys is not None:
        return dfa  # a finite chain is minimal as built (see counted_chain_dfa)
    if dfa is None:
        framed = framed_automaton_dfa(node, budget)  # "<automaton>": minimised as built
        if framed is not None:
            return framed
        nfa = build_nfa(node, budget)
        limit = budget.max_determinized_nfa_states
        if limit is not None and nfa.num_states > limit:
            raise CompileBudgetError(
                f"compile budget exceeded: an automaton of {nfa.num_states} NFA states "
                f"(more than {limit}) to determinise"
            )
        dfa = determinize(nfa, budget)
    return minimize(dfa, budget)


def compile_dfa(
    dfa: ByteDFA,
    vocab: Vocabulary,
    *,
    kind: str = "dfa",
    source: str = "",
    eager_max_states: int = DEFAULT_EAGER_MAX_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    marker_bytes: bytes = b"",
    index_now_s: float | None = None,
) -> CompiledGrammar:
    """Index ``dfa`` over ``vocab``.

    A DFA of at most ``eager_max_states`` states is indexed ahead of use: now, for at most
    ``index_now_s`` seconds of CPU time (``None``: ``AHEAD_MAX_S``; at least one chunk of
    states), and the states after those by the background thread
    (:mod:`~formcast.grammar.index.background_indexer`; ``grammar.index.wait_indexed()`` waits
    for it); a state asked for before the fill reaches it is indexed on the spot. A larger DFA
    is indexed on first use, state by state (memoised); its start state now.

    The language is first cut down to what ``vocab``'s tokens can write (`writable_dfa`), so
    no prefix the masks allow leads where no token continues. ``marker_bytes`` stand for
    something other than text (``AnyValueGrammar``'s container markers) and are kept.

    Raises
    ------
    GrammarError
        No string of the language can be written with ``vocab``'s tokens.
    """
    budget = CompileBudget(timeout_s=timeout_s)
    dfa = writable_dfa(dfa, writable_bytes(vocab, marker_bytes), budget)
    is_eager = dfa.num_states <= eager_max_states
    index = TokenIndex(dfa, vocab, is_eager=is_eager)
    with gc_paused():
        if is_eager:
            max_s = AHEAD_MAX_S if index_now_s is None else index_now_s
            if not index.build_eager(CompileBudget(timeout_s=timeout_s), max_s=max_s):
                index.index_ahead()  # the states after the first chunks
        index.row(dfa.start_state)  # the first mask is always needed
    if not is_eager:
        index.find_twins_ahead()  # first visits inside strings copy a twin's row
    return CompiledGrammar(kind, source, dfa, vocab, index)


def writable_bytes(vocab: Vocabulary, marker_bytes: bytes = b"") -> np.ndarray:
    """``(256,)`` bool: the bytes some text token of ``vocab`` holds, plus ``marker_bytes``.

    A byte-level vocabulary may lack some bytes altogether: SmolLM2 has no token holding
    0x04 0x06 0x13 0x14 0x16 0x1d, nor 0xf1 / 0xf2, the lead bytes of U+40000..U+BFFFF.
    """
    is_writable = vocab_table(vocab).held_bytes().copy()
    for byte in marker_bytes:
        is_writable[byte] = True
    return is_writable


def writable_dfa(dfa: ByteDFA, is_writable: np.ndarray, budget: CompileBudget) -> ByteDFA:
    """``dfa`` cut down to the strings made of ``is_writable`` bytes (trimmed, minimal).

    A DFA state whose every continuation needs a byte no token holds (`writable_bytes`) can
    be reached by tokens but allows none: a dead end mid-generation. Restricting the DFA to
    the writable bytes removes those states, so every state a mask allows reaches acceptance
    through tokens (exact where each byte some token holds is also a one-byte token, as in
    byte-level vocabularies; otherwise a sound superset). ``dfa`` is returned as it is when
    no state is lost (its other transitions are on bytes no token walks).

    Raises
    ------
    GrammarError
        If no string of the language can be written (names the bytes it would need).
    """
    if is_writable.all():
        return dfa
    # every class the DFA reads holds a writable byte: each transition can be taken with one,
    # so no state is lost (the common case: a class of "any character" holds a few bytes no
    # token has, beside many it has)
    has_writable = np.zeros(dfa.transitions.shape[1], dtype=bool)
    has_writable[dfa.byte_to_class[is_writable]] = True
    if has_writable[(dfa.transitions >= 0).any(axis=0)].all():
        return dfa
    try:
        restricted = restrict_bytes(dfa, is_writable)
    except GrammarError:
        used = (dfa.transitions >= 0).any(axis=0)[dfa.byte_to_class]  # (256,) per byte
        missing = ", ".join(f"0x{b:02x}" for b in np.flatnonzero(used & ~is_writable)[:8])
        raise GrammarError(
            "no output can match this grammar with this model's vocabulary: every string it "
            f"matches needs a byte that no token holds ({missing})"
        ) from None
    if restricted.num_states == dfa.num_states:
        return dfa
    return minimize(restricted, budget)


def compile_regex(
    pattern: str,
    vocab: Vocabulary,
    *,
    dialect: str = "python",
    max_states: int = DEFAULT_MAX_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    eager_max_states: int = DEFAULT_EAGER_MAX_STATES,
    cache: bool = True,
) -> CompiledGrammar:
    """Compile a regular expression that the whole output must fullmatch.

    Parameters
    ----------
    pattern:
        The regex. ``^``/``\\A`` at the start and ``$``/``\\Z`` at the end are accepted as
        anchors (they change nothing under fullmatch); anchors elsewhere are refused.
    vocab:
        The model's :class:`Vocabulary`.
    dialect:
        ``"python"`` (``re`` semantics: Unicode ``\\d \\w \\s``, ``.`` excludes ``\\n``) or
        ``"ecma"`` (ECMA-262 ``u``-mode as JSON Schema ``pattern``: ASCII ``\\d \\w``, ``.``
        excludes ``\\n \\r \\u2028 \\u2029``; still fullmatch, see :func:`regex_to_python`).
    max_states, timeout_s:
        Compile budget: most DFA states, and seconds for parse + automaton + eager index.
    eager_max_states:
        Index every state at compile time if the DFA has at most this many states; otherwise
        index states lazily on first use (memoised).
    cache:
        Reuse / store the result in the in-memory and on-disk grammar cache.

    Raises
    ------
    GrammarError
        Malformed or unsupported pattern (lookaround, backreference, ``\\b``, unsupported
        flag, ...) with its position, or a pattern that matches no string.
    CompileBudgetError
        The budget was exceeded.
    """
    if dialect not in ("python", "ecma"):
        raise GrammarError(f"unknown regex dialect {dialect!r}; expected 'python' or 'ecma'")
    return _compile_cached(
        lambda: pattern,
        vocab,
        kind="regex",
        source=pattern,
        options={"dialect": dialect},
        dialect=dialect,
        max_states=max_states,
        timeout_s=timeout_s,
        eager_max_states=eager_max_states,
        cache=cache,
    )


def compile_choice(
    choices: Sequence[str],
    vocab: Vocabulary,
    *,
    eager_max_states: int = DEFAULT_EAGER_MAX_STATES,
    cache: bool = True,
) -> CompiledGrammar:
    """Compile "exactly one of these strings" (taken literally, not as regexes).

    Raises
    ------
    GrammarError
        If ``choices`` is empty or contains something that is not a str.
    """
    if isinstance(choices, str):
        raise GrammarError("compile_choice expects a sequence of strings, not one string")
    options = list(choices)
    if not options:
        raise GrammarError("compile_choice needs at least one choice")
    for k, option in enumerate(options):
        if not isinstance(option, str):
            raise GrammarError(f"choice #{k} is {type(option).__name__}, expected str")
    node = Alternation(
        tuple(
            Concat(tuple(CharSet(((ord(c), ord(c)),), k) for c in o)) for k, o in enumerate(options)
        )
    )
    source = "\x1f".join(options)
    warm_kernels(vocab)  # before any budget clock starts

    def build() -> CompiledGrammar:
        with gc_paused():
            dfa = _node_to_dfa(node, CompileBudget())
        return compile_dfa(
            dfa, vocab, kind="choice", source=source, eager_max_states=eager_max_states
        )

    if not cache:
        return build()
    key = cache_key("choice", source, {"n": len(options)}, vocab)
    return GRAMMAR_CACHE.get_or_compile(key, vocab, build)


def regex_to_python(pattern: str, *, dialect: str = "ecma", search: bool = False) -> str:
    """Rewrite ``pattern`` as an equivalent Python-dialect regex for fullmatch use.

    With ``search=True`` the result fullmatches exactly the strings in which ``pattern`` is
    *found* (``re.search`` / JSON Schema ``pattern`` semantics): unanchored sides get
    ``[\\s\\S]*``. Anchors are honoured only at the ends of top-level alternatives.
    """
    node = parse_regex(pattern, dialect)
    return to_python_regex(search_form(node) if search else strip_anchors(node))


caches.register(
    "index.regex_to_dfa",
    f"LRU: {_DFA_MEMO_SIZE} DFAs, {_DFA_MEMO_MAX_CELLS:,} table cells each, "
    f"{_DFA_MEMO_TOTAL_CELLS:,} in all; trees up to {_DFA_MEMO_MAX_TREE_CHARS:,} regex characters",
    clear_dfa_memo,
)


def compile_tree(
    make_tree: Callable[[], Node],
    vocab: Vocabulary,
    *,
    kind: str,
    source: str,
    options: dict[str, object],
    max_states: int | Callable[[], int | None] = DEFAULT_MAX_STATES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    eager_max_states: int = DEFAULT_EAGER_MAX_STATES,
    cache: bool = True,
    marker_bytes: bytes = b"",
    unguarded_max_states: int = DEFAULT_MAX_STATES,
) -> CompiledGrammar:
    """Compile the syntax tree a grammar builds (JSON Schema), cached by what it was built from.

    Parameters
    ----------
    make_tree:
        Builds the tree (called on a cache miss only); its exceptions propagate.
    kind, source, options:
        The grammar's kind and source text (a schema's canonical JSON) and every option the
        tree depends on: together they are the cache key, so they must determine the tree.
    max_states, timeout_s, eager_max_states, cache:
        As :func:`compile_regex`; ``max_states`` may be a function, called once the tree is
        built (a budget that depends on what the tree holds; None: ``unguarded_max_states``
        for the DFA, no bound for the NFA): its limit then holds for the NFA too, an exit
        before determinisation (a JSON-schema tree's NFA is about as large as its DFA).
    marker_bytes:
        Bytes of the tree that are markers, not text (:func:`compile_dfa`).

    Raises
    ------
    GrammarError
        The tree matches no string, or holds a construct no automaton expresses.
    CompileBudgetError
        The budget was exceeded.
    """
    return _compile_cached(
        make_tree,
        vocab,
        kind=kind,
        source=source,
        options=options,
        dialect="python",
        max_states=max_states,
        timeout_s=timeout_s,
        eager_max_states=eager_max_states,
        cache=cache,
        marker_bytes=marker_bytes,
        unguarded_max_states=unguarded_max_states,
    )


def _compile_cached(
    make_pattern: Callable[[], str | Node],
    vocab: Vocabulary,
    *,
    kind: str,
    source: str,
    options: dict[str, object],
    dialect: str,
    max_states: int | Callable[[], int | None],
    timeout_s: float,
    eager_max_states: int,
    cache: bool,
    marker_bytes: bytes = b"",
    unguarded_max_states: int = DEFAULT_MAX_STATES,
) -> CompiledGrammar:
    """DFA of ``make_pattern()`` indexed over ``vocab``, through the grammar cache keyed by
    ``(kind, source, options)`` unless ``cache`` is off."""
    warm_kernels(vocab)  # before any budget clock starts

    def build() -> CompiledGrammar:
        pattern = make_pattern()
        limit, nfa_limit = max_states, None
        if callable(max_states):
            chosen = max_states()
            limit = unguarded_max_states if chosen is None else chosen
            nfa_limit = chosen
        assert isinstance(limit, int)
        dfa = regex_to_dfa(
            pattern,
            dialect=dialect,
            max_states=limit,
            timeout_s=timeout_s,
            max_nfa_states=nfa_limit,
        )
        # the whole eager index now (within AHEAD_MAX_S): a walk right after the compile met
        # rows the background thread had not reached (16-100 us each on the spot, 9 masks
        # of Snowplow sp_224's first walk over 50 us), while indexing it all here moved
        # compile p50 / p99 by less than run-to-run noise (RESULTS, stop 52)
        return compile_dfa(
            dfa,
            vocab,
            kind=kind,
            source=source,
            eager_max_states=eager_max_states,
            timeout_s=timeout_s,
            marker_bytes=marker_bytes,
        )

    if not cache:
        return build()
    return GRAMMAR_CACHE.get_or_compile(cache_key(kind, source, options, vocab), vocab, build)
