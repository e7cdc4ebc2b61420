"""CompiledGrammar: a minimal byte DFA plus its token index over one vocabulary.

Immutable from the caller's point of view (lazy index rows are filled in behind the scenes,
idempotently), picklable, and cheap to share between threads and sequences: per-sequence state
lives in :class:`~formcast.grammar.index.matcher.DfaMatcher`.
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.automata.byte_dfa import DEAD, ByteDFA
from formcast.grammar.index.matcher import DfaMatcher
from formcast.grammar.index.token_index import TokenIndex
from formcast.grammar.index.vocabulary import Vocabulary


class CompiledGrammar:
    """A grammar compiled against a vocabulary.

    Attributes
    ----------
    kind:
        ``"regex"``, ``"choice"``, ... (what the source text was).
    source:
        The grammar text (for ``repr`` and cache keys).
    dfa:
        The trimmed minimal :class:`ByteDFA`.
    index:
        The :class:`TokenIndex` (eager or lazy).
    """

    def __init__(
        self, kind: str, source: str, dfa: ByteDFA, vocab: Vocabulary, index: TokenIndex
    ) -> None:
        self.kind = kind
        self.source = source
        self.dfa = dfa
        self.vocab = vocab
        self.index = index
        self._forced: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        """Logits width this grammar's masks cover."""
        return self.vocab.vocab_size

    @property
    def num_states(self) -> int:
        """States of the minimal DFA."""
        return self.dfa.num_states

    @property
    def start_state(self) -> int:
        return self.dfa.start_state

    def matcher(self) -> DfaMatcher:
        """A fresh per-sequence cursor at the start state."""
        return DfaMatcher(self)

    def forced_bytes_table(self) -> np.ndarray:
        """``(num_states,)`` int16: the single byte a state forces, or ``-1``.

        A state forces a byte when it is not accepting (EOS is not allowed) and exactly one byte
        value continues the language.
        """
        if self._forced is None:
            dfa = self.dfa
            class_size = np.bincount(dfa.byte_to_class, minlength=dfa.num_classes)
            first_byte = np.full(dfa.num_classes, DEAD, dtype=np.int64)
            first_byte[dfa.byte_to_class[::-1]] = np.arange(255, -1, -1)
            is_defined = dfa.transitions >= 0  # (N, K)
            num_bytes = is_defined.astype(np.int64) @ class_size
            forced = np.where(
                (num_bytes == 1) & ~dfa.is_accepting,
                first_byte[np.argmax(is_defined, axis=1)],
                DEAD,
            )
            self._forced = forced.astype(np.int16)
        return self._forced

    def __getstate__(self) -> dict:
        return {
            "kind": self.kind,
            "source": self.source,
            "dfa": self.dfa,
            "vocab": self.vocab,
            "index": self.index,
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._forced = None

    def __repr__(self) -> str:
        text = self.source if len(self.source) <= 60 else self.source[:57] + "..."
        mode = "eager" if self.index.is_eager else "lazy"
        return (
            f"CompiledGrammar({self.kind}={text!r}, num_states={self.num_states}, "
            f"vocab_size={self.vocab_size}, index={mode})"
        )
