"""The engine's grammar side: the compile queue, grammar services, the mask filler.

- `GrammarCompiler` compiles requests' grammars in a thread pool, one compilation per key:
  ``submit(spec)`` checks the spec's input against the `GrammarLimits` at once (a
  `GrammarLimitError` before any compile work) and returns a `concurrent.futures.Future` of
  the compiled grammar; specs with equal keys share the same future, so a schema asked for by
  64 requests is compiled once. Finished futures are kept (most recent ``max_entries``) so
  later requests reuse them. With grammar workers (`GrammarWorkers`, ``num_workers > 0``) a
  thread hands the compile to a worker process under the limits' time and memory budgets and
  then loads the result from the disk cache; without, it compiles in the thread (the
  automaton kernels release the GIL, the Python parts share it with the engine).
- `StructuredOutputManager` turns a request's ``grammar=`` into either a ready
  compiled `Grammar` (checked against the engine's vocabulary) or a future from the
  `GrammarCompiler`, and computes the jump-forward tokens of a sequence with the shared
  `jump_forward_token_ids` (the same decision the reference loop makes).
- `MaskFiller` fills a step's grammar bitmask in a worker thread while the forward pass runs.
  The mask row of a sequence at step ``t`` depends only on the tokens it had before step
  ``t`` (sampled at ``t - 1``, plus jump-forward tokens), which are known once the step is
  scheduled. So the engine calls ``start(matchers)`` right after scheduling, runs the model
  (torch releases the GIL inside its kernels), and calls ``result()`` before sampling. Only
  the time ``result`` waits is on the critical path; ``fill_seconds`` is the total work,
  ``wait_seconds`` the part not hidden behind the forward pass. The bitmask is one reused
  pinned/CPU int32 buffer ``(rows, ceil(V/32))``; matchers get the whole buffer (so their
  fast row-copy path keeps its cached view) and the step uses its first ``B`` rows. Rows of
  unconstrained sequences are all ones. The sampler moves the host bitmask to the logits'
  device itself (`formcast.samplers.batch.to_device`: a copy into fresh pinned memory, sent
  non-blocking), so the next step may refill this buffer without waiting for the device.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from collections.abc import Sequence as SequenceABC
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import torch

from formcast.decoding.jump_forward import jump_forward_token_ids
from formcast.engine.grammar_workers import GrammarWorkers
from formcast.engine.sequence import Sequence
from formcast.errors import RequestError, TokenizerError
from formcast.grammar import Grammar, MaskHook, Vocabulary, allocate_token_bitmask
from formcast.grammar.caches import held_bytes
from formcast.grammar.index.token_index import VocabTable
from formcast.grammar.limits import GrammarLimits
from formcast.grammar.spec import GrammarLike, GrammarSpec

_MAX_ENTRIES = 256
_MAX_BYTES = 2 << 30  # arrays of the compiled grammars kept for reuse (beyond: oldest go)


class CompileObserver(Protocol):
    """Told about every compile a `GrammarCompiler` runs (the server's metrics)."""

    def compile_started(self) -> None:
        """A compile began (in a grammar thread)."""

    def compile_finished(self, seconds: float) -> None:
        """The compile that began ended (either way) after ``seconds`` of wall time."""


class GrammarCompiler:
    """Asynchronous, deduplicating grammar compilation.

    Parameters
    ----------
    vocab : Vocabulary
        The engine's vocabulary, passed to every ``compile_fn``.
    num_threads : int
        Worker threads (compilations that run at once).
    max_entries : int
        Compiled grammars remembered by key for reuse.
    max_bytes : int
        Bytes of arrays those grammars may hold together (`caches.held_bytes`); past it the
        least recently used are forgotten (a running compile never is, nor the newest).
    limits : GrammarLimits or None
        Size limits checked on submit, and the budgets the workers enforce (defaults if None).
    num_workers : int
        Worker processes compiling specs that carry a recipe (0: compile in the threads).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        num_threads: int = 2,
        max_entries: int = _MAX_ENTRIES,
        limits: GrammarLimits | None = None,
        num_workers: int = 0,
        max_bytes: int = _MAX_BYTES,
    ) -> None:
        self.vocab = vocab
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._sizes: dict[Hashable, int] = {}  # finished keys -> held bytes
        self.num_held_bytes = 0
        self.limits = limits if limits is not None else GrammarLimits()
        self.workers = GrammarWorkers(vocab, num_workers, self.limits) if num_workers > 0 else None
        if self.workers is not None:  # start them now, so the first request does not wait
            threading.Thread(
                target=self.workers.start_all, name="formcast-grammar-workers", daemon=True
            ).start()
        self._executor = ThreadPoolExecutor(num_threads, thread_name_prefix="formcast-grammar")
        self._futures: OrderedDict[Hashable, Future[Grammar]] = OrderedDict()
        self._lock = threading.Lock()
        self.observer: CompileObserver | None = None
        self.num_compiles = 0  # compilations started (deduplicated requests excluded)

    def submit(self, spec: GrammarSpec) -> Future[Grammar]:
        """The (shared) future of ``spec``'s compiled grammar; starts compiling if new.

        Raises
        ------
        GrammarLimitError
            The spec's input is over one of the limits (nothing was compiled).
        """
        with self._lock:
            future = self._reusable(spec.key)
        if future is not None:
            return future
        if spec.recipe is not None:
            spec.recipe.check_size(self.limits)  # outside the lock: linear in the input
        with self._lock:
            future = self._reusable(spec.key)  # another thread may have started it meanwhile
            if future is not None:
                return future
            future = self._executor.submit(self._compile, spec)
            self.num_compiles += 1
            self._futures[spec.key] = future
            self._evict()
            return future

    def _evict(self) -> None:
        """Forget the oldest finished entries while over ``max_entries`` or ``max_bytes``
        (lock held); a running compile and the newest entry stay."""
        while len(self._futures) > 1 and (
            len(self._futures) > self.max_entries or self.num_held_bytes > self.max_bytes
        ):
            oldest = next(iter(self._futures))
            if not self._futures[oldest].done():
                break  # never forget a running compilation
            del self._futures[oldest]
            self.num_held_bytes -= self._sizes.pop(oldest, 0)

    def _reusable(self, key: Hashable) -> Future[Grammar] | None:
        """The running or successful future of ``key`` (lock held), or None."""
        future = self._futures.get(key)
        if future is None or (future.done() and future.exception() is not None):
            return None
        self._futures.move_to_end(key)
        return future

    def _compile(self, spec: GrammarSpec) -> Grammar:
        observer = self.observer
        if observer is not None:
            observer.compile_started()
        started = time.perf_counter()
        try:
            is_cached = spec.recipe is not None and spec.recipe.options.get("cache", True)
            if self.workers is not None and is_cached:
                self.workers.compile(spec.recipe)  # type: ignore[arg-type]  # checked above
            grammar = spec.compile_fn(self.vocab)  # with a worker: loaded from the disk cache
            size = held_bytes(grammar, shared=(Vocabulary, VocabTable))  # both shared
            with self._lock:
                if spec.key in self._futures and spec.key not in self._sizes:
                    self._sizes[spec.key] = size
                    self.num_held_bytes += size
                    self._evict()
            return grammar
        finally:
            if observer is not None:
                observer.compile_finished(time.perf_counter() - started)

    def shutdown(self) -> None:
        """Stop the worker threads (running compilations finish first) and processes."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self.workers is not None:
            self.workers.shutdown()


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
    limits : GrammarLimits or None
        Size limits and compile budgets (see `GrammarCompiler`).
    num_workers : int
        Grammar worker processes (0: compile in the threads).
    """

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: tuple[int, ...],
        num_threads: int,
        limits: GrammarLimits | None = None,
        num_workers: int = 0,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.num_threads = num_threads
        self.limits = limits
        self.num_workers = num_workers
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
            self._compiler = GrammarCompiler(
                self.vocab, self.num_threads, limits=self.limits, num_workers=self.num_workers
            )
        return self._compiler

    @property
    def num_compiles(self) -> int:
        """Grammar compilations started so far."""
        return 0 if self._compiler is None else self._compiler.num_compiles

    def resolve(
        self, grammar: GrammarLike, where: str
    ) -> tuple[Grammar | None, Future[Grammar] | None, str]:
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

    def check_compiled(self, grammar: Grammar, where: str) -> None:
        """Refuse a grammar whose vocabulary is not the engine's (its masks would be wrong)."""
        vocab = grammar.vocab
        if self._checked_vocabs.get(id(vocab)) is vocab:
            return
        if vocab.vocab_size != self.vocab_size:
            raise RequestError(
                f"{where}: the grammar was compiled for vocab_size={vocab.vocab_size}, but the "
                f"model's logits have {self.vocab_size}"
            )
        if vocab.token_bytes != self.vocab.token_bytes and not _is_control_variant(
            vocab, self.vocab
        ):
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


class MaskFiller:
    """Per-step bitmask construction, overlapped with the model forward.

    Parameters
    ----------
    vocab_size : int
        Logits width (the bitmask has ``ceil(vocab_size / 32)`` words per row).
    is_async : bool
        Fill in a worker thread (True) or inline in ``result`` (False, for measurements).
    """

    def __init__(self, vocab_size: int, is_async: bool = True) -> None:
        self.vocab_size = vocab_size
        self.is_async = is_async
        self._buffer = allocate_token_bitmask(1, vocab_size)  # (rows, W), grown on demand
        self._executor = (
            ThreadPoolExecutor(1, thread_name_prefix="formcast-mask") if is_async else None
        )
        self._future: Future[None] | None = None
        self._matchers: list[MaskHook | None] = []
        self.fill_seconds = 0.0
        self.wait_seconds = 0.0
        self.last_fill_seconds = 0.0  # the latest step's fill / wait (for per-step statistics)
        self.last_wait_seconds = 0.0
        self.num_rows_filled = 0
        self.num_fills = 0

    def start(self, matchers: SequenceABC[MaskHook | None]) -> None:
        """Begin filling row ``i`` from ``matchers[i]`` (None: every token allowed).

        Nothing is done when no row is constrained; ``result`` then returns None.
        """
        if self._future is not None:
            self._future.result()  # a previous step's fill was never collected
            self._future = None
        self._matchers = list(matchers)
        if all(m is None for m in self._matchers):
            return
        if self._buffer.shape[0] < len(self._matchers):
            self._buffer = allocate_token_bitmask(len(self._matchers), self.vocab_size)
        if self._executor is not None:
            self._future = self._executor.submit(self._fill, self._matchers)

    def result(self) -> torch.Tensor | None:
        """The filled ``(B, ceil(V/32))`` host bitmask of the rows given to ``start`` (or None).

        The tensor is a view of a reused host buffer: valid until the next ``start``. Hand it
        to the sampler as it is (it copies a host bitmask to the device without blocking); a
        blocking ``.to(device)`` here would be a synchronisation of the step.
        """
        matchers = self._matchers
        if all(m is None for m in matchers):
            return None
        begin = time.perf_counter()
        if self._future is not None:
            future, self._future = self._future, None
            future.result()
        else:
            self._fill(matchers)
        self.last_wait_seconds = time.perf_counter() - begin
        self.wait_seconds += self.last_wait_seconds
        return self._buffer[: len(matchers)]

    def _fill(self, matchers: list[MaskHook | None]) -> None:
        begin = time.perf_counter()
        buffer = self._buffer
        rows = buffer.numpy()  # shares memory with the tensor
        for row, matcher in enumerate(matchers):
            if matcher is None:
                rows[row] = -1
            else:
                matcher.fill_bitmask(buffer, row)
        self.last_fill_seconds = time.perf_counter() - begin
        self.fill_seconds += self.last_fill_seconds
        self.num_rows_filled += len(matchers)
        self.num_fills += 1

    def shutdown(self) -> None:
        """Stop the worker thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)


def _is_control_variant(vocab: Vocabulary, base: Vocabulary) -> bool:
    """True if ``vocab`` is ``base`` with some special tokens writing their text (a grammar
    with control tokens, ``Vocabulary.with_control_tokens``)."""
    try:
        derived = base.with_control_tokens(base.special_token_ids - vocab.special_token_ids)
    except TokenizerError:
        return False
    return derived.token_bytes == vocab.token_bytes
