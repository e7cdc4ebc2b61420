"""CompiledCFG: a context-free grammar compiled against a vocabulary, and ``compile_cfg``.

Like :class:`~formcast.grammar.compiled_grammar.CompiledGrammar` it is shared by all sequences
and hands out cheap per-sequence cursors through ``matcher()``. What is independent of the
parser (terminal automata, per-lexer-state token walks) is built once and memoised; masks are
memoised per parse configuration (see :mod:`formcast.grammar.cfg_runtime`). Pickling keeps only
the grammar and the vocabulary; the automata are rebuilt on load.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from formcast.grammar.cfg_grammar import CfgGrammar, PreparedGrammar, prepare_grammar
from formcast.grammar.cfg_lexer import CfgLexer, pack_ids
from formcast.grammar.cfg_matcher import CfgMatcher
from formcast.grammar.cfg_runtime import CfgRuntime
from formcast.grammar.earley_parser import EarleyParser
from formcast.grammar.grammar_cache import cache_key
from formcast.grammar.token_index import vocab_table
from formcast.grammar.vocabulary import Vocabulary

_MAX_CACHED = 64
_CACHE: OrderedDict[str, CompiledCFG] = OrderedDict()
_CACHE_LOCK = threading.Lock()


class CompiledCFG:
    """A context-free grammar over one vocabulary (exact incremental token masks).

    Attributes
    ----------
    kind:
        ``"lark"``, ``"gbnf"`` or ``"json_schema"``.
    source:
        The grammar text.
    cfg:
        The :class:`~formcast.grammar.cfg_grammar.CfgGrammar` it was built from.
    """

    def __init__(
        self, kind: str, source: str, cfg: CfgGrammar, vocab: Vocabulary, **options
    ) -> None:
        self.kind = kind
        self.source = source
        self.cfg = cfg
        self.vocab = vocab
        self.options = options
        self._build()

    def _build(self) -> None:
        self.prepared: PreparedGrammar = prepare_grammar(self.cfg, **self.options)
        table = vocab_table(self.vocab)
        self.parser = EarleyParser(self.prepared)
        self.lexer = CfgLexer(self.prepared, table)
        eos_row = pack_ids(table.eos_token_ids.astype(np.int64), table.num_words)
        self.runtime = CfgRuntime(self.parser, self.lexer, eos_row)
        self.initial_heads = self.runtime.initial_heads()
        self.runtime.mask(self.initial_heads)  # the first mask is always needed

    @property
    def vocab_size(self) -> int:
        """Logits width this grammar's masks cover."""
        return self.vocab.vocab_size

    def matcher(self) -> CfgMatcher:
        """A fresh per-sequence cursor at the start."""
        return CfgMatcher(self)

    def __getstate__(self) -> dict:
        return {
            "kind": self.kind,
            "source": self.source,
            "cfg": self.cfg,
            "vocab": self.vocab,
            "options": self.options,
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build()

    def __repr__(self) -> str:
        text = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        return (
            f"CompiledCFG({self.kind}={text!r}, terminals={self.prepared.num_terminals}, "
            f"rules={len(self.prepared.rules) - 1}, vocab_size={self.vocab_size})"
        )


def compile_cfg(
    kind: str,
    source: str,
    options: dict,
    vocab: Vocabulary,
    make_cfg: Callable[[], CfgGrammar],
    *,
    lenient: bool = False,
    cache: bool = True,
) -> CompiledCFG:
    """Build (or fetch from the in-memory cache) the :class:`CompiledCFG` of ``make_cfg()``.

    The key covers ``kind``, ``source``, ``options``, ``lenient`` and the vocabulary hash.
    """
    if not cache:
        return CompiledCFG(kind, source, make_cfg(), vocab, lenient=lenient)
    key = cache_key("cfg-" + kind, source, {**options, "lenient": lenient}, vocab)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found
    compiled = CompiledCFG(kind, source, make_cfg(), vocab, lenient=lenient)
    with _CACHE_LOCK:
        _CACHE[key] = compiled
        while len(_CACHE) > _MAX_CACHED:
            _CACHE.popitem(last=False)
    return compiled
