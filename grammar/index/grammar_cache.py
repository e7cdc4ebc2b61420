"""GrammarCache: compiled grammars kept in memory (LRU) and on disk, keyed by content.

Key = sha256(kind, grammar text, options, vocabulary hash). On disk a grammar is one pickle
under ``$FORMCAST_CACHE/grammars`` (default ``~/.cache/formcast/grammars``), written atomically
(temp file + rename) without the vocabulary, which is re-attached on load. A corrupt or
unreadable file is treated as a miss and recompiled. ``load_payload`` / ``store_payload`` are the
disk layer alone; context-free grammars (``cfg_compiled``) use it with their own payloads
(keys prefixed ``cfg-`` before hashing, so they never collide with regex entries).
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

from formcast.grammar import caches
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.token_index import TokenIndex
from formcast.grammar.index.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 4  # 2: distinct index rows; 3: SplitGroup.records_key; 4: ByteDFA.walk_keys
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

    def _load(self, key: str, vocab: Vocabulary) -> CompiledGrammar | None:
        payload = load_payload(key)
        if payload is None or payload.get("version") != _FORMAT_VERSION:
            return None
        try:
            dfa = payload["dfa"]
            index = TokenIndex.from_state(dfa, vocab, payload["index"])
            return CompiledGrammar(payload["kind"], payload["source"], dfa, vocab, index)
        except Exception as exc:  # noqa: BLE001 - a bad cache file is a miss, not a failure
            logger.warning("ignoring unreadable grammar cache entry %s: %s", key, exc)
            return None

    def _store(self, key: str, grammar: CompiledGrammar) -> None:
        payload = {
            "version": _FORMAT_VERSION,
            "kind": grammar.kind,
            "source": grammar.source,
            "dfa": grammar.dfa,
            "index": grammar.index.export_state(),
        }
        store_payload(key, payload)


def _payload_path(key: str) -> Path:
    return default_cache_dir() / f"{key}.pkl"


def load_payload(key: str) -> dict | None:
    """The pickled dict stored under ``key`` on disk, or ``None`` (missing or unreadable).

    Shared by the regex cache above and the context-free grammar cache (``cfg_compiled``).
    """
    path = _payload_path(key)
    try:
        with open(path, "rb") as handle:
            payload = pickle.load(handle)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a bad cache file is a miss, not a failure
        logger.warning("ignoring unreadable grammar cache file %s: %s", path, exc)
        return None
    return payload if isinstance(payload, dict) else None


def store_payload(key: str, payload: dict) -> None:
    """Write ``payload`` under ``key`` atomically (temp file + rename); errors only warn."""
    directory = default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, delete=False, suffix=".tmp") as tmp:
            pickle.dump(payload, tmp, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp.name, _payload_path(key))
    except OSError as exc:
        logger.warning("could not write grammar cache in %s: %s", directory, exc)


GRAMMAR_CACHE = GrammarCache()
caches.register(
    "index.compiled_grammars",
    f"LRU: {_MAX_IN_MEMORY} grammars (disk entries stay)",
    GRAMMAR_CACHE.clear_memory,
)
