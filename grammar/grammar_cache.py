"""GrammarCache: compiled grammars kept in memory (LRU) and on disk, keyed by content.

Key = sha256(kind, grammar text, options, vocabulary hash). On disk a grammar is one pickle
under ``$FORMCAST_CACHE/grammars`` (default ``~/.cache/formcast/grammars``), written atomically
(temp file + rename) without the vocabulary, which is re-attached on load. A corrupt or
unreadable file is treated as a miss and recompiled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from formcast.grammar.compiled_grammar import CompiledGrammar
from formcast.grammar.token_index import TokenIndex
from formcast.grammar.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 1
_MAX_IN_MEMORY = 128


def cache_key(kind: str, text: str, options: dict[str, Any], vocab: Vocabulary) -> str:
    """sha256 over everything the compiled grammar depends on."""
    digest = hashlib.sha256()
    payload = json.dumps([_FORMAT_VERSION, kind, text, options], sort_keys=True, default=str)
    digest.update(payload.encode("utf-8"))
    digest.update(vocab.hash.encode("ascii"))
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``$FORMCAST_CACHE/grammars``, or ``~/.cache/formcast/grammars``."""
    root = os.environ.get("FORMCAST_CACHE") or os.path.join(Path.home(), ".cache", "formcast")
    return Path(root) / "grammars"


class GrammarCache:
    """In-memory LRU plus on-disk pickles of compiled grammars."""

    def __init__(self, max_in_memory: int = _MAX_IN_MEMORY) -> None:
        self.max_in_memory = max_in_memory
        self._memory: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compile(
        self, key: str, vocab: Vocabulary, compile_fn: Callable[[], CompiledGrammar]
    ) -> CompiledGrammar:
        """The cached grammar for ``key``, or ``compile_fn()`` stored under it."""
        with self._lock:
            found = self._memory.get(key)
            if found is not None:
                self._memory.move_to_end(key)
                return found
        grammar = self._load(key, vocab)
        if grammar is None:
            grammar = compile_fn()
            self._store(key, grammar)
        with self._lock:
            self._memory[key] = grammar
            while len(self._memory) > self.max_in_memory:
                self._memory.popitem(last=False)
        return grammar

    def clear_memory(self) -> None:
        """Forget the in-memory entries (disk entries stay)."""
        with self._lock:
            self._memory.clear()

    def _path(self, key: str) -> Path:
        return default_cache_dir() / f"{key}.pkl"

    def _load(self, key: str, vocab: Vocabulary) -> CompiledGrammar | None:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                payload = pickle.load(handle)
            if payload.get("version") != _FORMAT_VERSION:
                return None
            dfa = payload["dfa"]
            index = TokenIndex.from_state(dfa, vocab, payload["index"])
            return CompiledGrammar(payload["kind"], payload["source"], dfa, vocab, index)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - a bad cache file is a miss, not a failure
            logger.warning("ignoring unreadable grammar cache file %s: %s", path, exc)
            return None

    def _store(self, key: str, grammar: CompiledGrammar) -> None:
        directory = default_cache_dir()
        payload = {
            "version": _FORMAT_VERSION,
            "kind": grammar.kind,
            "source": grammar.source,
            "dfa": grammar.dfa,
            "index": grammar.index.export_state(),
        }
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=directory, delete=False, suffix=".tmp") as tmp:
                pickle.dump(payload, tmp, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp.name, self._path(key))
        except OSError as exc:
            logger.warning("could not write grammar cache in %s: %s", directory, exc)


GRAMMAR_CACHE = GrammarCache()
