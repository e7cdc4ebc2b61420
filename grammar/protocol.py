"""Grammar and Matcher: the two protocols every grammar kind implements and every caller uses.

Three kinds implement them today: the DFA-indexed ``CompiledGrammar`` (regexes, choices,
non-recursive schemas), ``CompiledCFG`` (Lark, GBNF, recursive and very large schemas) and
``AnyValueGrammar`` (schemas whose unconstrained values nest without bound). The engine, the
decoding strategies and the facade type against these protocols, never against ``Any`` and never
by probing attributes with ``hasattr``; ``isinstance(x, Grammar)`` works (runtime-checkable).

A ``Grammar`` is immutable and shared by every sequence and thread; a ``Matcher`` is one
sequence's cursor over it. Bitmask layout: :mod:`formcast.bitmask`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import torch

    from formcast.grammar.index.vocabulary import Vocabulary


@runtime_checkable
class MaskHook(Protocol):
    """The least a per-sequence token constraint must do for the engine to sample under it.

    The engine's low-level ``matcher=`` hook takes any such object (no jump-forward, no
    completeness report); every grammar cursor (:class:`Matcher`) is one.
    """

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed next tokens into ``bitmask[row]`` (int32, ``(B, ceil(V/32))``)."""
        ...

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if it is not allowed."""
        ...

    def is_terminated(self) -> bool:
        """True once nothing more may be generated."""
        ...

    def fork(self) -> MaskHook:
        """An independent copy at the same position (``n > 1``, beams, speculation)."""
        ...


@runtime_checkable
class Matcher(MaskHook, Protocol):
    """One sequence's position in a grammar: accept tokens, fill masks, roll back, fork.

    Invariants: a rejected token or byte string leaves the matcher unchanged; after
    ``rollback(n)`` the matcher is exactly where it was ``n`` accepted steps earlier;
    ``fork()`` is independent of its parent.
    """

    @property
    def num_accepted(self) -> int:
        """Steps accepted so far (tokens, byte strings and EOS)."""
        ...

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the grammar does not allow it."""
        ...

    def accept_tokens(self, token_ids: list[int] | np.ndarray) -> int:
        """Advance token by token; returns how many were accepted before the first reject."""
        ...

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (jump-forward text); False (and no change) if not allowed."""
        ...

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed next tokens into ``bitmask[row]`` (int32, ``(B, ceil(V/32))``)."""
        ...

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed next token ids, ascending."""
        ...

    def forced_bytes(self) -> bytes:
        """The bytes every valid continuation starts with (jump-forward), possibly empty."""
        ...

    def is_accepting(self) -> bool:
        """True if the output so far is complete (EOS is allowed now)."""
        ...

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or the output is complete and nothing can follow."""
        ...

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted steps."""
        ...

    def reset(self) -> None:
        """Back to the start, as if freshly made."""
        ...

    def fork(self) -> Matcher:
        """An independent copy at the same position (beam search, speculative branches)."""
        ...


@runtime_checkable
class Grammar(Protocol):
    """A grammar compiled against one vocabulary: shared, immutable, picklable.

    Attributes
    ----------
    kind : str
        What the source was: ``"regex"``, ``"choice"``, ``"json_schema"``, ``"lark"``, ...
    source : str
        The grammar text (schemas as JSON text), for messages and ``repr``.
    vocab : Vocabulary
        The vocabulary its masks are indexed over.
    """

    kind: str
    source: str
    vocab: Vocabulary

    @property
    def vocab_size(self) -> int:
        """Logits width this grammar's masks cover (may exceed the tokenizer's length)."""
        ...

    def matcher(self) -> Matcher:
        """A fresh per-sequence cursor at the start."""
        ...
