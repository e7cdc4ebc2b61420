"""StructuredOutputManager: the engine's grammar side (vocabulary, compilation, jump-forward).

It turns a request's ``grammar=`` into either a ready `CompiledGrammar` (checked against the
engine's vocabulary) or a future from the asynchronous `GrammarCompiler`, and computes the
jump-forward tokens of a sequence with the shared `jump_forward_token_ids` (the same
decision the reference loop makes).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from formcast.decoding.jump_forward import jump_forward_token_ids
from formcast.engine.grammar_compiler import GrammarCompiler
from formcast.engine.grammar_spec import GrammarSpec
from formcast.engine.sequence import Sequence
from formcast.errors import RequestError
from formcast.grammar import CompiledGrammar, Vocabulary


class StructuredOutputManager:
    """Grammar services for one engine.

    Parameters
    ----------
    tokenizer : Any
        The engine's transformers tokenizer (vocabulary bytes, canonical re-tokenization).
    vocab_size : int
        Logits width.
    eos_token_ids : tuple[int, ...]
        The engine's EOS ids (grammars allow them exactly where they accept).
    num_threads : int
        Grammar compilation threads.
    """

    def __init__(
        self, tokenizer: Any, vocab_size: int, eos_token_ids: tuple[int, ...], num_threads: int
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.num_threads = num_threads
        self._vocab: Vocabulary | None = None
        self._compiler: GrammarCompiler | None = None
        self._checked_vocabs: dict[int, Vocabulary] = {}  # id -> vocab known to match ours

    @property
    def vocab(self) -> Vocabulary:
        """The engine's vocabulary (built on first use, ~0.5 s for 50k tokens)."""
        if self._vocab is None:
            self._vocab = Vocabulary.from_tokenizer(
                self.tokenizer, vocab_size=self.vocab_size, eos_token_ids=self.eos_token_ids
            )
        return self._vocab

    @property
    def compiler(self) -> GrammarCompiler:
        """The asynchronous compiler (started on first use)."""
        if self._compiler is None:
            self._compiler = GrammarCompiler(self.vocab, self.num_threads)
        return self._compiler

    @property
    def num_compiles(self) -> int:
        """Grammar compilations started so far."""
        return 0 if self._compiler is None else self._compiler.num_compiles

    def resolve(
        self, grammar: Any, where: str
    ) -> tuple[CompiledGrammar | None, Future | None, str]:
        """``(compiled, future, name)``: exactly one of ``compiled`` / ``future`` is set.

        A spec whose compilation already finished (shared with an earlier request) comes
        back compiled, so the request can be scheduled at once.

        Raises
        ------
        RequestError
            An unusable ``grammar`` value or a grammar compiled for another vocabulary.
        """
        grammar = GrammarSpec.coerce(grammar)
        if not isinstance(grammar, GrammarSpec):
            self.check_compiled(grammar, where)
            return grammar, None, repr(grammar)
        future = self.compiler.submit(grammar)
        if future.done() and future.exception() is None:
            compiled = future.result()
            self.check_compiled(compiled, where)
            return compiled, None, str(grammar)
        return None, future, str(grammar)

    def check_compiled(self, grammar: Any, where: str) -> None:
        """Refuse a grammar whose vocabulary is not the engine's (its masks would be wrong)."""
        vocab = grammar.vocab
        if self._checked_vocabs.get(id(vocab)) is vocab:
            return
        if vocab.vocab_size != self.vocab_size:
            raise RequestError(
                f"{where}: the grammar was compiled for vocab_size={vocab.vocab_size}, but the "
                f"model's logits have {self.vocab_size}"
            )
        if vocab.token_bytes != self.vocab.token_bytes:
            raise RequestError(
                f"{where}: the grammar was compiled for a different tokenizer's vocabulary"
            )
        self._checked_vocabs[id(vocab)] = vocab

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (canonical tokenization)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def forced_token_ids(self, seq: Sequence, max_tokens: int) -> list[int]:
        """Jump-forward tokens for ``seq`` now (at most ``max_tokens``; empty: sample)."""
        if not seq.jump_forward or seq.matcher is None or seq.grammar is None:
            return []
        return jump_forward_token_ids(
            seq.matcher, seq.token_ids, seq.grammar.vocab, self.encode, max_tokens=max_tokens
        )

    def shutdown(self) -> None:
        """Stop the compilation threads."""
        if self._compiler is not None:
            self._compiler.shutdown()
