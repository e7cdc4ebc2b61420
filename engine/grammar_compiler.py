"""GrammarCompiler: compiles requests' grammars in a thread pool, one compilation per key.

``submit(spec)`` returns a `concurrent.futures.Future` of the compiled grammar; specs with
equal keys share the same future, so a schema asked for by 64 requests is compiled once.
Finished futures are kept (most recent ``max_entries``) so later requests reuse them. The
threads hold the GIL only while running Python; the engine keeps stepping meanwhile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor

from formcast.engine.grammar_spec import GrammarSpec
from formcast.grammar import CompiledGrammar, Vocabulary

_MAX_ENTRIES = 256


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
    """

    def __init__(
        self, vocab: Vocabulary, num_threads: int = 2, max_entries: int = _MAX_ENTRIES
    ) -> None:
        self.vocab = vocab
        self.max_entries = max_entries
        self._executor = ThreadPoolExecutor(num_threads, thread_name_prefix="formcast-grammar")
        self._futures: OrderedDict[Hashable, Future[CompiledGrammar]] = OrderedDict()
        self._lock = threading.Lock()
        self.num_compiles = 0  # compilations started (deduplicated requests excluded)

    def submit(self, spec: GrammarSpec) -> Future[CompiledGrammar]:
        """The (shared) future of ``spec``'s compiled grammar; starts compiling if new."""
        with self._lock:
            future = self._futures.get(spec.key)
            if future is not None and not (future.done() and future.exception() is not None):
                self._futures.move_to_end(spec.key)
                return future
            future = self._executor.submit(spec.compile_fn, self.vocab)
            self.num_compiles += 1
            self._futures[spec.key] = future
            while len(self._futures) > self.max_entries:
                oldest = next(iter(self._futures))
                if not self._futures[oldest].done():
                    break  # never forget a running compilation
                del self._futures[oldest]
            return future

    def shutdown(self) -> None:
        """Stop the worker threads (running compilations finish first)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
