"""ReasoningGrammar: free reasoning between two tags, then any grammar's answer, exact.

Language: ``start + t + end + a`` where ``t`` is any byte string in which ``end`` does not
occur (``end`` is found at its FIRST occurrence after ``start``) and ``a`` is a sentence of the
answer grammar. Phase 1 (the tags and the thoughts) is tracked here, byte by byte: a position
in ``start`` and then the Knuth-Morris-Pratt state of ``end``; phase 2 is the answer grammar's
own matcher, started fresh right after the end tag.

A token may straddle the phases (``>{"`` completes ``</think`` and starts a JSON answer): it
is allowed iff its bytes after the end tag are a valid start of the answer. Masks of phase 1
depend only on the phase-1 state (the answer matcher is still at its start), so they are
memoised per grammar: a mask is the vocabulary's text tokens, less the few tokens that could
complete the end tag and are checked one by one (those starting with the rest of the end tag,
or with the rest after one of its borders, or holding it whole). Thoughts are bytes: no UTF-8
check inside them (a byte-fallback token may split a character; the answer is checked).

Budget: once ``max_tokens`` tokens holding bytes past the start tag were accepted, the rest of the tags is forced:
only tokens that continue it (a prefix of it, or it followed by a valid answer start) are
allowed, and ``forced_bytes`` returns it (jump-forward).
"""

from __future__ import annotations

import bisect
import threading
from typing import TYPE_CHECKING

import numpy as np

from formcast.bitmask import (
    bitmask_row,
    copy_packed_row,
    pack_row,
    prepared_rows,
    row_token_ids,
)
from formcast.errors import GrammarError
from formcast.grammar.reasoning.config import ReasoningConfig

if TYPE_CHECKING:
    import torch

    from formcast.grammar.index.vocabulary import Vocabulary
    from formcast.grammar.protocol import Grammar, Matcher


class _VocabPrefixes:
    """Per vocabulary (built once): the text tokens by their bytes, sorted for prefix ranges,
    and the packed row of every text token."""

    _built: dict[tuple[str, int], _VocabPrefixes] = {}
    _lock = threading.Lock()

    def __init__(self, vocab: Vocabulary, vocab_size: int) -> None:
        token_bytes = vocab.token_bytes[: min(vocab_size, len(vocab.token_bytes))]
        pairs = sorted((data, token_id) for token_id, data in enumerate(token_bytes) if data)
        self.sorted_bytes = [data for data, _ in pairs]
        self.sorted_ids = [token_id for _, token_id in pairs]
        self.ids_of_bytes: dict[bytes, list[int]] = {}
        for data, token_id in pairs:
            self.ids_of_bytes.setdefault(data, []).append(token_id)
        is_text = np.zeros(vocab_size, dtype=bool)
        is_text[self.sorted_ids] = True
        self.text_words = pack_row(is_text)  # (W,) uint32
        self.vocab_size = vocab_size
        self._holding: dict[bytes, list[int]] = {}

    def starting_with(self, prefix: bytes) -> list[int]:
        """Ids of the text tokens whose bytes start with ``prefix``."""
        lo = bisect.bisect_left(self.sorted_bytes, prefix)
        hi = lo
        while hi < len(self.sorted_bytes) and self.sorted_bytes[hi].startswith(prefix):
            hi += 1
        return self.sorted_ids[lo:hi]

    def prefixes_of(self, data: bytes) -> list[int]:
        """Ids of the text tokens whose bytes are a non-empty prefix of ``data``."""
        found: list[int] = []
        for k in range(1, len(data) + 1):
            found.extend(self.ids_of_bytes.get(data[:k], ()))
        return found

    def holding(self, data: bytes) -> list[int]:
        """Ids of the text tokens that hold ``data`` somewhere (one scan per ``data``)."""
        found = self._holding.get(data)
        if found is None:
            found = [
                t for d, t in zip(self.sorted_bytes, self.sorted_ids, strict=True) if data in d
            ]
            self._holding[data] = found
        return found

    def is_writable(self, data: bytes) -> bool:
        """True if ``data`` is a concatenation of text tokens."""
        reachable = [True] + [False] * len(data)
        for k in range(len(data)):
            if not reachable[k]:
                continue
            for j in range(k + 1, len(data) + 1):
                if data[k:j] in self.ids_of_bytes:
                    reachable[j] = True
        return reachable[-1]

    @classmethod
    def of(cls, vocab: Vocabulary, vocab_size: int) -> _VocabPrefixes:
        key = (vocab.hash, vocab_size)
        with cls._lock:
            found = cls._built.get(key)
            if found is None:
                found = cls._built[key] = cls(vocab, vocab_size)
        return found


class ReasoningGrammar:
    """Free reasoning between ``config``'s tags, then ``answer`` (see the module docstring).

    Parameters
    ----------
    answer : Grammar
        The grammar of what follows the end tag.
    config : ReasoningConfig
        The tags and the token budget.

    Raises
    ------
    GrammarError
        A tag cannot be written with the vocabulary's text tokens (e.g. it is a special token
        the tokenizer never emits as text).
    """

    def __init__(self, answer: Grammar, config: ReasoningConfig) -> None:
        self.answer = answer
        self.config = config
        self.kind = answer.kind
        self.source = answer.source
        self.vocab: Vocabulary = answer.vocab
        self.start = config.start.encode()
        self.end = config.end.encode()
        self.prefixes = _VocabPrefixes.of(answer.vocab, answer.vocab_size)
        for name, data in (("start", self.start), ("end", self.end)):
            if data and not self.prefixes.is_writable(data):
                raise GrammarError(
                    f"the reasoning {name} tag {data.decode()!r} cannot be written with this "
                    "vocabulary's text tokens (is it a special token?)"
                )
        # phase-1 states: 0..len(start)-1 inside the start tag, len(start)+q in the thoughts
        # with q bytes of the end tag matched (KMP), FINAL once the end tag is complete
        self.num_states = len(self.start) + len(self.end)
        self.final = self.num_states
        self._delta = _kmp_table(self.end)  # (len(end), 256) next q
        self._borders = _border_chain(self.end)  # q -> the q' < q along the failure links
        self._rows: dict[tuple[int, bool], np.ndarray] = {}
        self._answer_starts: dict[bytes, bool] = {}
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        """Logits width of the masks (the answer grammar's)."""
        return self.answer.vocab_size

    def matcher(self) -> ReasoningMatcher:
        """A fresh cursor at the start of the reasoning."""
        return ReasoningMatcher(self)

    # -- phase 1 ------------------------------------------------------------------------------

    def advance(self, state: int, data: bytes) -> tuple[int, int] | None:
        """``(state', k)`` after ``data`` from phase-1 ``state``: ``k`` = how many bytes phase 1
        took (``state' == final`` when the end tag completed; the rest belongs to the answer);
        None if ``data`` leaves the start tag."""
        num_start = len(self.start)
        delta = self._delta
        for k, byte in enumerate(data):
            if state < num_start:
                if byte != self.start[state]:
                    return None
                state += 1
                continue
            q = delta[state - num_start][byte]
            state = num_start + q
            if q == len(self.end):
                return self.final, k + 1
        return state, len(data)

    def remaining_tags(self, state: int) -> bytes:
        """The shortest text that closes the reasoning from phase-1 ``state`` (what the budget
        forces): the rest of the start tag and the whole end tag, or the end tag's rest."""
        num_start = len(self.start)
        if state < num_start:
            return self.start[state:] + self.end
        return self.end[state - num_start :]

    def answer_starts_with(self, data: bytes) -> bool:
        """True if ``data`` is a prefix of some sentence of the answer grammar (memoised)."""
        found = self._answer_starts.get(data)
        if found is None:
            found = self._answer_starts[data] = self.answer.matcher().accept_bytes(data)
        return found

    def allows(self, state: int, data: bytes, is_forced: bool) -> bool:
        """True if text ``data`` may follow phase-1 ``state`` (``is_forced``: budget spent)."""
        if is_forced:
            rest = self.remaining_tags(state)
            if not (rest.startswith(data) or data.startswith(rest)):
                return False
        step = self.advance(state, data)
        if step is None:
            return False
        after, taken = step
        return after != self.final or taken == len(data) or self.answer_starts_with(data[taken:])

    def row(self, state: int, is_forced: bool) -> np.ndarray:
        """``(W,)`` uint32: the allowed tokens at phase-1 ``state`` (memoised)."""
        key = (state, is_forced)
        found = self._rows.get(key)
        if found is None:
            with self._lock:
                found = self._rows.get(key)
                if found is None:
                    found = self._rows[key] = self._build_row(state, is_forced)
        return found

    def _build_row(self, state: int, is_forced: bool) -> np.ndarray:
        prefixes = self.prefixes
        num_start = len(self.start)
        if is_forced or state < num_start:
            # the tags' rest must be written: only tokens along it can be allowed
            rest = self.remaining_tags(state) if is_forced else self.start[state:]
            words = np.zeros_like(prefixes.text_words)
            candidates = prefixes.prefixes_of(rest) + prefixes.starting_with(rest)
        else:
            # thoughts: every text token, less those that complete the end tag wrongly; a token
            # completes it iff (matched part + token) holds it: the token starts with the rest
            # after some border of the matched part, or holds the whole tag
            words = prefixes.text_words.copy()
            q = state - num_start
            candidates = list(prefixes.holding(self.end))
            for border in self._borders[q]:
                candidates.extend(prefixes.starting_with(self.end[border:]))
        token_bytes = self.vocab.token_bytes
        for token_id in candidates:
            bit = np.uint32(1 << (token_id % 32))
            if self.allows(state, token_bytes[token_id], is_forced):
                words[token_id // 32] |= bit
            else:
                words[token_id // 32] &= ~bit
        words.setflags(write=False)
        return words


def _kmp_table(pattern: bytes) -> list[list[int]]:
    """``table[q][b]``: bytes of ``pattern`` matched after byte ``b`` with ``q`` matched
    (``q < len(pattern)``; the value ``len(pattern)`` means a complete occurrence)."""
    failure = [0] * (len(pattern) + 1)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = failure[k]
        if pattern[i] == pattern[k]:
            k += 1
        failure[i + 1] = k
    table = []
    for q in range(len(pattern)):
        row = [0] * 256
        for byte in range(256):
            j = q
            while j and pattern[j] != byte:
                j = failure[j]
            row[byte] = j + 1 if pattern[j] == byte else 0
        table.append(row)
    return table


def _border_chain(pattern: bytes) -> list[list[int]]:
    """For each ``q``: ``q`` and every shorter border of ``pattern[:q]`` that is not 0 (the
    match lengths from which a token's first bytes can continue the occurrence)."""
    chains = []
    for q in range(len(pattern)):
        chain = [q] if q else []
        for j in range(q - 1, 0, -1):
            if pattern[:q].endswith(pattern[:j]):
                chain.append(j)
        chains.append(chain)
    return chains


class ReasoningMatcher:
    """One sequence's cursor: a phase-1 state and a token count, then the answer's matcher.

    Every accepted step pushes ``(phase-1 state, tokens counted, answer steps so far)`` as it
    was before the step, so ``rollback`` restores them and rolls the answer matcher back by
    the difference.
    """

    def __init__(self, grammar: ReasoningGrammar) -> None:
        self.grammar = grammar
        self._answer: Matcher = grammar.answer.matcher()
        self._state = 0  # the start tag's first byte (with no start tag: the thoughts, q = 0)
        self._num_thought_tokens = 0
        self._num_answer_steps = 0
        self._history: list[tuple[int, int, int]] = []

    # -- state --------------------------------------------------------------------------------

    @property
    def num_accepted(self) -> int:
        """Steps accepted so far (tokens, byte strings and EOS)."""
        return len(self._history)

    @property
    def is_in_answer(self) -> bool:
        """True once the end tag is complete."""
        return self._state == self.grammar.final

    @property
    def num_thought_tokens(self) -> int:
        """Tokens accepted inside the reasoning (the budget's count)."""
        return self._num_thought_tokens

    def _is_forced(self) -> bool:
        budget = self.grammar.config.max_tokens
        return budget is not None and self._num_thought_tokens >= budget

    # -- accepting ----------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if it is not allowed."""
        if self.is_in_answer:
            if not self._answer.accept_token(token_id):
                return False
            self._push(self._state, self._num_thought_tokens, self._num_answer_steps + 1)
            return True
        if not 0 <= token_id < len(self.grammar.vocab.token_bytes):
            return False
        data = self.grammar.vocab.token_bytes[token_id]
        if not data:
            return False  # EOS, special and padding ids: never inside the reasoning
        # a token counts once it carries bytes past the start tag (thoughts or the end tag)
        is_counted = self._state + len(data) > len(self.grammar.start)
        return self._accept_text(data, num_tokens=int(is_counted))

    def accept_tokens(self, token_ids: list[int] | np.ndarray) -> int:
        """Advance token by token; how many were accepted before the first reject."""
        for k, token_id in enumerate(token_ids):
            if not self.accept_token(int(token_id)):
                return k
        return len(token_ids)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (jump-forward text, not counted by the budget)."""
        if self.is_in_answer:
            if not self._answer.accept_bytes(data):
                return False
            self._push(self._state, self._num_thought_tokens, self._num_answer_steps + 1)
            return True
        return self._accept_text(data, num_tokens=0)

    def _accept_text(self, data: bytes, num_tokens: int) -> bool:
        grammar = self.grammar
        if not grammar.allows(self._state, data, self._is_forced()):
            return False
        after, taken = grammar.advance(self._state, data)  # allowed: not None
        num_answer_steps = self._num_answer_steps
        if after == grammar.final and taken < len(data):
            if not self._answer.accept_bytes(data[taken:]):
                return False
            num_answer_steps += 1
        self._push(after, self._num_thought_tokens + num_tokens, num_answer_steps)
        return True

    def _push(self, state: int, num_thought_tokens: int, num_answer_steps: int) -> None:
        self._history.append((self._state, self._num_thought_tokens, self._num_answer_steps))
        self._state = state
        self._num_thought_tokens = num_thought_tokens
        self._num_answer_steps = num_answer_steps

    # -- masks --------------------------------------------------------------------------------

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed next tokens into ``bitmask[row]``."""
        if self.is_in_answer:
            self._answer.fill_bitmask(bitmask, row)
            return
        words = self.grammar.row(self._state, self._is_forced()).view(np.int32)
        # a CPU bitmask with rows of exactly these words: one numpy row copy (a torch copy
        # costs ~20x more, and the engine's mask thread fills every row of a step)
        rows = prepared_rows(bitmask, len(words), self.grammar.vocab_size)
        if rows is not None and 0 <= row < rows.shape[0]:
            rows[row] = words
        else:
            copy_packed_row(bitmask_row(bitmask, row), words)

    def allowed_token_ids(self) -> np.ndarray:
        """The allowed next token ids, ascending."""
        if self.is_in_answer:
            return self._answer.allowed_token_ids()
        words = self.grammar.row(self._state, self._is_forced())
        return row_token_ids(words, self.grammar.vocab_size)

    def forced_bytes(self) -> bytes:
        """The rest of the start tag; with the budget spent, the rest of the tags and the
        answer's forced start; in the answer, the answer's forced bytes."""
        grammar = self.grammar
        if self.is_in_answer:
            return self._answer.forced_bytes()
        if self._is_forced():
            return grammar.remaining_tags(self._state) + grammar.answer.matcher().forced_bytes()
        if self._state < len(grammar.start):
            return grammar.start[self._state :]
        return b""

    def is_accepting(self) -> bool:
        """True if the output so far is complete (the answer is)."""
        return self.is_in_answer and self._answer.is_accepting()

    def is_terminated(self) -> bool:
        """True once the answer is terminated."""
        return self.is_in_answer and self._answer.is_terminated()

    # -- moving -------------------------------------------------------------------------------

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted steps."""
        if num_tokens <= 0:
            return
        if num_tokens > len(self._history):
            raise GrammarError(
                f"cannot roll back {num_tokens} steps: only {len(self._history)} were accepted"
            )
        state, num_thought_tokens, num_answer_steps = self._history[-num_tokens]
        self._answer.rollback(self._num_answer_steps - num_answer_steps)
        del self._history[-num_tokens:]
        self._state = state
        self._num_thought_tokens = num_thought_tokens
        self._num_answer_steps = num_answer_steps

    def reset(self) -> None:
        """Back to the start."""
        self.rollback(len(self._history))

    def fork(self) -> ReasoningMatcher:
        """An independent copy at the same position."""
        twin = ReasoningMatcher.__new__(ReasoningMatcher)
        twin.grammar = self.grammar
        twin._answer = self._answer.fork()
        twin._state = self._state
        twin._num_thought_tokens = self._num_thought_tokens
        twin._num_answer_steps = self._num_answer_steps
        twin._history = list(self._history)
        return twin

    def __repr__(self) -> str:
        where = "answer" if self.is_in_answer else f"reasoning state {self._state}"
        return f"ReasoningMatcher({where}, accepted={self.num_accepted})"
