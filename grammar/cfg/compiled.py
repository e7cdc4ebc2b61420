"""CompiledCFG: a context-free grammar compiled against a vocabulary, and ``compile_cfg``.

Like :class:`~formcast.grammar.index.compiled_grammar.CompiledGrammar` it is shared by all sequences
(and threads) and hands out cheap per-sequence cursors through ``matcher()``. What is
independent of the parser (terminal automata, per-lexer-state token walks) is built once and
memoised; masks are memoised per parse configuration (see :mod:`formcast.grammar.cfg.runtime`).

Caching: ``compile_cfg`` keeps compiled grammars in memory (LRU) and on disk (one grammar file
per key in the directory of :mod:`formcast.grammar.index.grammar_cache`; data only, see
:mod:`formcast.grammar.index.grammar_file`): the prepared grammar (terminal automata) and the
lexer with every token walk computed at compile time, without the vocabulary, which is
re-attached on load. A disk hit skips grammar parsing, automaton construction and the first
vocabulary walks; an unreadable or stale entry is logged and rebuilt. Plain pickling of a
``CompiledCFG`` (not the disk cache) keeps only the grammar and the vocabulary; the automata
are rebuilt on load.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from formcast.errors import GrammarError
from formcast.grammar import caches
from formcast.grammar.automata.budget import check_deadline, gc_paused
from formcast.grammar.cfg import lexer as cfg_lexer
from formcast.grammar.cfg.earley import EarleyParser
from formcast.grammar.cfg.lexer import CfgLexer, pack_ids
from formcast.grammar.cfg.matcher import CfgMatcher
from formcast.grammar.cfg.rules import CfgGrammar, PreparedGrammar, prepare_grammar
from formcast.grammar.cfg.runtime import NUM_EXACT_HEADS, CfgRuntime
from formcast.grammar.index.compile import writable_bytes
from formcast.grammar.index.grammar_cache import cache_key, load_payload, store_payload
from formcast.grammar.index.token_index import VocabTable, vocab_table
from formcast.grammar.index.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_MAX_CACHED = 64
_CACHE: OrderedDict[str, CompiledCFG] = OrderedDict()
_CACHE_LOCK = threading.Lock()
# compile-time target (thread CPU seconds): lexer walks are precomputed until a compile has
# spent this long (see CfgLexer.precompute); what is left is walked on first use
_COMPILE_TARGET_S = 0.02
_DISK_VERSION = 12  # bump when the stored layout of PreparedGrammar / CfgLexer changes
# vocabulary tables are cached weakly by the regex side; keep the last few alive here so
# compiling grammar after grammar does not rebuild them
_RECENT_TABLES: OrderedDict[str, VocabTable] = OrderedDict()


def _table(vocab: Vocabulary) -> VocabTable:
    table = vocab_table(vocab)
    with _CACHE_LOCK:
        _RECENT_TABLES[vocab.hash] = table
        _RECENT_TABLES.move_to_end(vocab.hash)
        while len(_RECENT_TABLES) > 4:
            _RECENT_TABLES.popitem(last=False)
    return table


def check_max_depth(max_depth: int | None) -> None:
    """Raise ``GrammarError`` unless ``max_depth`` is ``None`` or a positive int."""
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
    ):
        raise GrammarError(f"max_depth must be a positive int or None, got {max_depth!r}")


@dataclass(frozen=True)
class CfgTuning:
    """How a compiled CFG's runtime and lexer choose between their exact paths.

    Every setting gives the same masks; the defaults are formcast's, and tests set others to
    compare the paths with each other.

    Parameters
    ----------
    parser_kind : str
        ``"auto"`` (JSON-Schema grammars: ``"glr"``, LR tables built on first use that fork at
        conflicts; others: LR where the grammar has SLR(1) tables, else Earley),
        ``"earley"``, ``"lr"`` or ``"glr"`` (see :class:`~formcast.grammar.cfg.runtime.
        CfgRuntime`).
    num_exact_heads : int
        Heads per head set whose masks are exact and memoised; the rest are pruned.
    min_set_parts : int or None or "by_kind"
        Lexer states with this many single-terminal parts are walked as one set (None: never;
        ``"by_kind"``: ``MIN_SET_PARTS`` for JSON-Schema grammars, never for Lark / GBNF).
    """

    parser_kind: str = "auto"
    num_exact_heads: int = NUM_EXACT_HEADS
    min_set_parts: int | None | Literal["by_kind"] = "by_kind"

    def options_key(self) -> dict[str, object]:
        """The settings that differ from the defaults (part of the cache key)."""
        return {
            name: value
            for name, value in asdict(self).items()
            if value != getattr(DEFAULT_TUNING, name)
        }


DEFAULT_TUNING = CfgTuning()


class CompiledCFG:
    """A context-free grammar over one vocabulary (exact incremental token masks).

    Attributes
    ----------
    kind:
        ``"lark"``, ``"gbnf"`` or ``"json_schema"``.
    source:
        The grammar text.
    cfg:
        The :class:`~formcast.grammar.cfg.rules.CfgGrammar` it was built from.
    max_depth:
        Nesting depth beyond which matchers raise ``GrammarError`` (``None``: unbounded).
    """

    def __init__(
        self,
        kind: str,
        source: str,
        cfg: CfgGrammar,
        vocab: Vocabulary,
        *,
        lenient: bool = False,
        max_depth: int | None = None,
        prepared: PreparedGrammar | None = None,
        lexer_state: dict | None = None,
        started: float | None = None,
        precompute_s: float = _COMPILE_TARGET_S,
        tuning: CfgTuning = DEFAULT_TUNING,
    ) -> None:
        check_max_depth(max_depth)
        self.tuning = tuning
        started = time.thread_time() if started is None else started
        self.precompute_s = precompute_s
        self.kind = kind
        self.source = source
        self.cfg = cfg
        self.vocab = vocab
        self.lenient = lenient
        self.max_depth = max_depth
        self._build(prepared, lexer_state, started)

    def _build(
        self, prepared: PreparedGrammar | None, lexer_state: dict | None, started: float
    ) -> None:
        if prepared is None:
            prepared = prepare_grammar(
                self.cfg, lenient=self.lenient, is_writable=writable_bytes(self.vocab)
            )
        self.prepared: PreparedGrammar = prepared
        check_deadline("preparing the grammar")
        table = _table(self.vocab)
        self.parser = EarleyParser(prepared)
        min_set_parts = self.tuning.min_set_parts
        if min_set_parts == "by_kind":
            # set walks pay off for JSON-Schema grammars (objects with many key terminals),
            # not for Lark/GBNF ones (see cfg_lexer.MIN_SET_PARTS)
            min_set_parts = cfg_lexer.MIN_SET_PARTS if self.kind == "json_schema" else None
        self.lexer = CfgLexer(prepared, table, min_set_parts)
        if lexer_state is not None:
            self.lexer.load_state(lexer_state)
        eos_row = pack_ids(table.eos_token_ids.astype(np.int64), table.num_words)
        parser_kind = self.tuning.parser_kind
        if parser_kind == "auto" and self.kind == "json_schema" and self.max_depth is None:
            # JSON-Schema grammars: unions of objects that share a key prefix are not SLR(1),
            # and thousands of LR states are never read by one output: tables built state by
            # state, forking at conflicts (the Earley parser cost ~80 us per first step)
            parser_kind = "glr"
        self.runtime = CfgRuntime(
            self.parser,
            self.lexer,
            eos_row,
            self.max_depth,
            parser_kind=parser_kind,
            num_exact_heads=self.tuning.num_exact_heads,
        )
        self.initial_heads = self.runtime.initial_heads()
        self.runtime.mask(self.initial_heads)  # the first mask is always needed
        if lexer_state is None:  # (a cached lexer has its walks already)
            with self.runtime.lock:
                self.lexer.precompute(self.precompute_s - (time.thread_time() - started))

    @property
    def vocab_size(self) -> int:
        """Logits width this grammar's masks cover."""
        return self.vocab.vocab_size

    def matcher(self) -> CfgMatcher:
        """A fresh per-sequence cursor at the start."""
        return CfgMatcher(self)

    def cache_payload(self) -> dict:
        """What the disk cache stores: everything built so far except the vocabulary."""
        with self.runtime.lock:
            lexer_state = self.lexer.export_state()
        return {
            "cfg_version": _DISK_VERSION,
            "kind": self.kind,
            "source": self.source,
            "cfg": self.cfg,
            "lenient": self.lenient,
            "max_depth": self.max_depth,
            "tuning": self.tuning,
            "prepared": self.prepared,
            "lexer": lexer_state,
        }

    @classmethod
    def from_cache_payload(cls, payload: dict, vocab: Vocabulary) -> CompiledCFG:
        """Rebuild from :meth:`cache_payload` output and the same vocabulary."""
        return cls(
            payload["kind"],
            payload["source"],
            payload["cfg"],
            vocab,
            lenient=payload["lenient"],
            max_depth=payload["max_depth"],
            prepared=payload["prepared"],
            lexer_state=payload["lexer"],
            tuning=payload["tuning"],
        )

    def __getstate__(self) -> dict:
        return {
            "kind": self.kind,
            "source": self.source,
            "cfg": self.cfg,
            "vocab": self.vocab,
            "lenient": self.lenient,
            "max_depth": self.max_depth,
            "precompute_s": self.precompute_s,
            "tuning": self.tuning,
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build(None, None, time.thread_time())

    def __repr__(self) -> str:
        text = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        return (
            f"CompiledCFG({self.kind}={text!r}, terminals={self.prepared.num_terminals}, "
            f"rules={len(self.prepared.rules) - 1}, vocab_size={self.vocab_size})"
        )


def _from_disk(key: str, vocab: Vocabulary) -> CompiledCFG | None:
    payload = load_payload(key)  # (logs a file it cannot read)
    if payload is None:
        return None
    if payload.get("cfg_version") != _DISK_VERSION:
        logger.warning(
            "ignoring CFG cache entry %s of version %r (expected %d)",
            key,
            payload.get("cfg_version"),
            _DISK_VERSION,
        )
        return None
    try:
        return CompiledCFG.from_cache_payload(payload, vocab)
    except Exception as exc:  # noqa: BLE001 - a stale or corrupt entry is a miss, not a failure
        logger.warning("ignoring unusable CFG cache entry %s: %s", key, exc)
        return None


def compile_cfg(
    kind: str,
    source: str,
    options: dict,
    vocab: Vocabulary,
    make_cfg: Callable[[], CfgGrammar],
    *,
    lenient: bool = False,
    max_depth: int | None = None,
    cache: bool = True,
    precompute_s: float = _COMPILE_TARGET_S,
    tuning: CfgTuning = DEFAULT_TUNING,
) -> CompiledCFG:
    """Build (or fetch from the memory / disk cache) the :class:`CompiledCFG` of ``make_cfg()``.

    The key covers ``kind``, ``source``, ``options``, ``lenient``, ``max_depth``, the
    ``tuning`` settings that differ from the defaults and the vocabulary hash. ``cache=False`` neither reads nor writes either cache. ``precompute_s``:
    lexer walks are computed ahead of use until the compile has taken this long (thread CPU
    seconds); the rest on first use.
    """
    check_max_depth(max_depth)
    started = time.thread_time()

    def build() -> CompiledCFG:
        with gc_paused():
            return CompiledCFG(
                kind,
                source,
                make_cfg(),
                vocab,
                lenient=lenient,
                max_depth=max_depth,
                started=started,
                precompute_s=precompute_s,
                tuning=tuning,
            )

    if not cache:
        return build()
    key = cache_key(
        "cfg-" + kind,
        source,
        {**options, "lenient": lenient, "max_depth": max_depth, **tuning.options_key()},
        vocab,
    )
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found
    compiled = _from_disk(key, vocab)
    if compiled is None:
        compiled = build()
        store_payload(key, compiled.cache_payload())
    with _CACHE_LOCK:
        _CACHE[key] = compiled
        while len(_CACHE) > _MAX_CACHED:
            _CACHE.popitem(last=False)
    return compiled


def clear_memory_cache() -> None:
    """Forget the in-memory compiled grammars (disk entries stay)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _clear_recent_tables() -> None:
    _RECENT_TABLES.clear()


caches.register("cfg.compiled_grammars", f"LRU: {_MAX_CACHED} grammars", clear_memory_cache)
caches.register("cfg.vocab_tables", "the last 4 vocabulary tables", _clear_recent_tables)
