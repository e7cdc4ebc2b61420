"""AnyValueGrammar: a schema byte DFA whose unconstrained values nest without bound.

The regex route's JSON-Schema DFA, compiled with ``max_any_depth=None``, writes containers
inside unconstrained values (``true`` / ``{}`` schemas, undeclared keys under ``strict=False``)
as a marker (``compiler.any_marker``); this grammar runs it as a stack of automata
(``any_value_frames``): the schema DFA at the bottom, one container automaton ``A_d`` per open
marked container above it. ``A_d`` (one container at depth ``d`` with its nested containers
marked again, a syntax tree) is compiled like any tree and memoised per process (the same
one for every schema of a layout); under ``indent`` one is built per depth on first use.

Masks. A token without ``{ [ ] }`` can neither push nor pop: inside the top frame it is
allowed iff the top automaton's precomputed index row allows it (tokens with the marker bytes
are removed: they are never text). The few thousand tokens with a bracket (*candidates*, fixed
per vocabulary) are decided by the numba kernel ``fill_candidates``. Schema states from which
no token can open a frame (most of them; found at compile time by ``needs_frames``) use their
index row as it is, exactly as the plain regex route. Other rows are memoised per
configuration, keyed by the frames a token can reach (the top ``1 + c`` frames,
``c`` = most closing brackets in one candidate), so in steady state a mask is a dict lookup
and a row copy, as on the regex route.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from formcast.grammar import caches
from formcast.grammar.index.compile import compile_dfa, regex_to_dfa
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.token_index import vocab_table
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema.any_value import frames
from formcast.grammar.json_schema.any_value.frames import (
    TOKEN_BRACKET,
    TOKEN_NEVER,
    TOKEN_PLAIN,
    FrameMachine,
)
from formcast.grammar.json_schema.any_value.matcher import AnyValueMatcher
from formcast.grammar.json_schema.compiler import container_tree
from formcast.grammar.json_schema.layout import Layout

_MAX_MASKS = 1024  # memoised rows per grammar (~6 kB each at V = 49k)
_PRECOMPUTE_S = 0.01  # compile-time budget for the rows of lone bottom frames


@dataclass(frozen=True, eq=False)
class Candidates:
    """The vocabulary's tokens with a bracket, laid out for ``fill_candidates``.

    Attributes
    ----------
    token_flat, token_lo, token_ids:
        Candidate ``i`` is ``token_flat[token_lo[i]:token_lo[i + 1]]`` with id ``token_ids[i]``.
    kinds:
        ``(V,)`` int8 per id: ``TOKEN_PLAIN`` (no bracket), ``TOKEN_BRACKET`` (a candidate),
        ``TOKEN_NEVER`` (empty, special, or containing a marker byte).
    marker_words:
        ``(ceil(V/32),)`` uint32: the ids containing a marker byte.
    probe_flat, probe_lo, probe_firsts, probe_first_lo:
        The candidates and the tokens with a marker byte, ordered by first byte (for
        ``needs_frames``): the probes starting with byte ``probe_firsts[j]`` (ascending,
        distinct) are ``probe_first_lo[j]:probe_first_lo[j + 1]``.
    max_len:
        Longest candidate in bytes.
    max_close:
        Most closing brackets in one candidate (frames one token can pop).
    """

    token_flat: np.ndarray
    token_lo: np.ndarray
    token_ids: np.ndarray
    kinds: np.ndarray
    marker_words: np.ndarray
    probe_flat: np.ndarray
    probe_lo: np.ndarray
    probe_firsts: np.ndarray
    probe_first_lo: np.ndarray
    max_len: int
    max_close: int


# by vocabulary hash; a few kept (they cost ~20 ms to build, and grammars come and go)
_CANDIDATES: dict[str, Candidates] = {}
_CANDIDATES_LOCK = threading.Lock()
_MAX_VOCABS = 4


def candidates_of(vocab: Vocabulary) -> Candidates:
    """The (cached per vocabulary hash) :class:`Candidates` of ``vocab``."""
    with _CANDIDATES_LOCK:
        found = _CANDIDATES.get(vocab.hash)
        if found is None:
            if len(_CANDIDATES) >= _MAX_VOCABS:
                _CANDIDATES.clear()
            found = _CANDIDATES[vocab.hash] = _build_candidates(vocab)
        return found


def _build_candidates(vocab: Vocabulary) -> Candidates:
    table = vocab_table(vocab)
    matrix = table.matrix  # (T, max_len) uint8, zero padded
    is_byte = np.arange(matrix.shape[1])[None, :] < table.lengths[:, None]
    is_marker = (matrix == frames.MARKER_BYTE) | (matrix == frames.DEPTH_BYTE)
    has_marker = (is_marker & is_byte).any(1)
    brackets = np.frombuffer(frames.BRACKET_BYTES, dtype=np.uint8)
    has_bracket = (np.isin(matrix, brackets) & is_byte).any(1) & ~has_marker
    kinds = np.full(vocab.vocab_size, TOKEN_NEVER, dtype=np.int8)
    kinds[table.token_ids[~has_marker]] = TOKEN_PLAIN
    kinds[table.token_ids[has_bracket]] = TOKEN_BRACKET
    ids = table.token_ids[has_bracket].astype(np.int64)
    marker_ids = table.token_ids[has_marker]
    pieces = [bytes(vocab.token_bytes[t]) for t in ids.tolist()]
    marker_pieces = [bytes(vocab.token_bytes[t]) for t in marker_ids.tolist()]
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    probes = sorted(pieces + marker_pieces, key=lambda piece: piece[0])  # (stable)
    probe_lengths = np.fromiter(map(len, probes), dtype=np.int64, count=len(probes))
    firsts = np.array([piece[0] for piece in probes], dtype=np.int64)
    probe_firsts, probe_first_lo = np.unique(firsts, return_index=True)
    bits = np.zeros(table.num_words * 32, dtype=bool)
    bits[marker_ids] = True
    return Candidates(
        token_flat=np.frombuffer(b"".join(pieces) or b"\0", dtype=np.uint8).copy(),
        token_lo=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        token_ids=ids,
        kinds=kinds,
        marker_words=np.packbits(bits, bitorder="little").view(np.uint32).copy(),
        probe_flat=np.frombuffer(b"".join(probes) or b"\0", dtype=np.uint8).copy(),
        probe_lo=np.concatenate([[0], np.cumsum(probe_lengths)]).astype(np.int64),
        probe_firsts=probe_firsts.astype(np.int64),
        probe_first_lo=np.append(probe_first_lo, len(probes)).astype(np.int64),
        max_len=int(lengths.max(initial=1)),
        max_close=max((p.count(b"}") + p.count(b"]") for p in pieces), default=0),
    )


# the bytes that stand for nesting, not text: kept when a DFA is cut down to what a
# vocabulary can write (compile_dfa)
MARKER_BYTES = bytes((frames.MARKER_BYTE, frames.DEPTH_BYTE))

# container automata by (layout, depth, vocabulary hash): the same few for every schema of a
# layout
_CONTAINERS: dict[tuple[Layout, int, str], CompiledGrammar] = {}
_CONTAINERS_LOCK = threading.Lock()
_MAX_CONTAINERS = 64


def container_grammar(layout: Layout, depth: int, vocab: Vocabulary) -> CompiledGrammar:
    """The compiled container automaton ``A_depth`` of ``layout`` over ``vocab`` (memoised in
    the process)."""
    key = (layout, depth, vocab.hash)
    with _CONTAINERS_LOCK:
        found = _CONTAINERS.get(key)
    if found is None:
        dfa = regex_to_dfa(container_tree(layout, depth))
        found = compile_dfa(
            dfa,
            vocab,
            kind="json_container",
            source=f"{layout.key()} @{depth}",
            marker_bytes=MARKER_BYTES,
        )
        with _CONTAINERS_LOCK:
            if len(_CONTAINERS) >= _MAX_CONTAINERS:
                _CONTAINERS.clear()
            _CONTAINERS[key] = found
    return found


class AnyValueGrammar:
    """A compiled JSON Schema with unboundedly nested unconstrained values (module docstring).

    Same use as :class:`~formcast.grammar.index.compiled_grammar.CompiledGrammar`: share it between
    threads and sequences, and take one :meth:`matcher` per sequence.

    Attributes
    ----------
    schema_grammar:
        The schema automaton (markers included) as a regex-route ``CompiledGrammar``.
    layout:
        The output layout (fixes the container automata).
    machine:
        The :class:`FrameMachine` over the schema automaton and the container automata.
    """

    kind = "json_schema_frames"

    def __init__(self, schema_grammar: CompiledGrammar, layout: Layout) -> None:
        self.schema_grammar = schema_grammar
        self.layout = layout
        self.vocab = schema_grammar.vocab
        self.kind = schema_grammar.kind
        self.source = schema_grammar.source
        self.candidates = candidates_of(self.vocab)
        self._lock = threading.Lock()
        self._containers: dict[int, CompiledGrammar] = {}
        self._masks: dict[tuple, np.ndarray] = {}
        self.reach = self.candidates.max_close + 1  # frames one token can touch
        self.machine = FrameMachine(
            schema_grammar.dfa, self._container_dfa, layout.is_depth_dependent
        )
        # schema states (a lone bottom frame) whose mask is exactly their index row
        needs = np.zeros(schema_grammar.num_states, dtype=np.bool_)
        cand = self.candidates
        tables = self.machine.tables.arrays
        frames.needs_frames(
            schema_grammar.num_states, cand.probe_flat, cand.probe_lo, cand.probe_firsts,
            cand.probe_first_lo, tables, needs,
        )  # fmt: skip
        self.is_plain_state: list[bool] = (~needs).tolist()
        # a lone bottom frame's row depends on the schema state only: rows that need the
        # kernel are computed now, within a compile-time budget, so their first use is a lookup
        deadline = time.perf_counter() + _PRECOMPUTE_S
        for state in np.flatnonzero(needs)[: _MAX_MASKS // 2].tolist():
            if time.perf_counter() > deadline:
                break
            self.mask(((state,),))

    def _container_dfa(self, depth: int):
        grammar = container_grammar(self.layout, depth, self.vocab)
        self._containers[depth] = grammar
        return grammar.dfa

    def locate(self, g: int) -> tuple[CompiledGrammar, int]:
        """The automaton of global state ``g`` and ``g``'s local state in it."""
        tables = self.machine.tables
        k = int(tables.auto_of[g])
        grammar = self.schema_grammar if k == 0 else self._containers[self.machine.depths[k - 1]]
        return grammar, g - int(tables.state_base[k])

    # -- masks ----------------------------------------------------------------------------

    def mask(self, configs: tuple[tuple[int, ...], ...]) -> np.ndarray:
        """The packed ``(ceil(V/32),)`` int32 row of a configuration set (memoised)."""
        if len(configs) == 1 and len(configs[0]) == 1 and self.is_plain_state[configs[0][0]]:
            return self.schema_grammar.index.row(configs[0][0])
        reach = self.reach
        key = configs[0][-reach:] if len(configs) == 1 else tuple(c[-reach:] for c in configs)
        found = self._masks.get(key)
        if found is not None:
            return found
        rows = [self._stack_row(stack[-reach:]) for stack in configs]
        row = rows[0] if len(rows) == 1 else np.bitwise_or.reduce(rows)
        with self._lock:
            if len(self._masks) >= _MAX_MASKS:
                self._masks.clear()
            self._masks[key] = row
        return row

    def _stack_row(self, stack: tuple[int, ...]) -> np.ndarray:
        grammar, local = self.locate(stack[-1])
        base = grammar.index.row(local)
        words = base.view(np.uint32) & ~self.candidates.marker_words
        cand = self.candidates
        arr = np.asarray(stack, dtype=np.int32)
        while True:
            code = frames.fill_candidates(
                arr,
                len(stack),
                cand.token_flat,
                cand.token_lo,
                cand.token_ids,
                self.machine.tables.arrays,
                self.machine.work_arrays(cand.max_len),
                words,
            )
            if code == 0:
                break
            self.machine.ensure(code)
        if np.array_equal(words, base.view(np.uint32)):
            return base  # nothing to add or remove: share the index row
        return words.view(np.int32)

    # -- advancing ------------------------------------------------------------------------

    def advance(
        self, configs: tuple[tuple[int, ...], ...], data: bytes, kind: int
    ) -> tuple[tuple[int, ...], ...]:
        """The configurations after ``data`` (``()`` if no reading survives)."""
        if kind == TOKEN_NEVER:
            return ()
        out: dict[tuple[int, ...], None] = {}
        if kind == TOKEN_PLAIN:  # no push, no pop: the top automaton alone
            for stack in configs:
                grammar, local = self.locate(stack[-1])
                nxt = grammar.dfa.walk(local, data)
                if nxt >= 0:
                    out[(*stack[:-1], stack[-1] - local + nxt)] = None
            return tuple(out)
        return self.machine.advance(configs, data)

    def byte_kind(self, data: bytes) -> int:
        """``TOKEN_*`` kind of an arbitrary byte string."""
        if frames.MARKER_BYTE in data or frames.DEPTH_BYTE in data:
            return TOKEN_NEVER
        return TOKEN_BRACKET if any(b in data for b in frames.BRACKET_BYTES) else TOKEN_PLAIN

    # -- the CompiledGrammar surface --------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Logits width this grammar's masks cover."""
        return self.vocab.vocab_size

    @property
    def start_configs(self) -> tuple[tuple[int, ...], ...]:
        return ((self.schema_grammar.start_state,),)

    def matcher(self) -> AnyValueMatcher:
        """A fresh per-sequence cursor at the start."""
        return AnyValueMatcher(self)

    def __getstate__(self) -> dict:
        return {"schema_grammar": self.schema_grammar, "layout": self.layout}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["schema_grammar"], state["layout"])

    def __repr__(self) -> str:
        return (
            f"AnyValueGrammar(schema_states={self.schema_grammar.num_states}, "
            f"containers={len(self.machine.depths)}, vocab_size={self.vocab_size})"
        )


def _clear_candidates() -> None:
    _CANDIDATES.clear()


def _clear_containers() -> None:
    _CONTAINERS.clear()


caches.register(
    "json_schema.any_value.candidates",
    f"{_MAX_VOCABS} vocabularies, then emptied",
    _clear_candidates,
)
caches.register(
    "json_schema.any_value.containers",
    f"{_MAX_CONTAINERS} automata, then emptied",
    _clear_containers,
)
