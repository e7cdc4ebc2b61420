"""DFA minimisation: Hopcroft's partition refinement over byte classes.

Input and output are trimmed :class:`ByteDFA`s. The refinement runs on the partial DFA (a
missing transition is a behaviour of its own, so every initial block splits by every class
entering it), so two states are merged iff they accept the same set of suffixes. Runs in
O(K n log n) for ``K`` byte classes (:func:`~formcast.grammar.automata.kernels.hopcroft`).
"""

from __future__ import annotations

import numpy as np

from formcast.grammar.automata import kernels
from formcast.grammar.automata.budget import CompileBudget
from formcast.grammar.automata.byte_dfa import DEAD, ByteDFA, trim

# Above this many defined transitions Hopcroft (a numba kernel: ~0.1 s per million transitions)
# is skipped; such DFAs are only reduced by merging identical states (exact, usually
# near-minimal, indexed lazily anyway).
MAX_HOPCROFT_TRANSITIONS = 2_000_000
_MAX_MERGE_ROUNDS = 64


def minimize(dfa: ByteDFA, budget: CompileBudget, position: int | None = None) -> ByteDFA:
    """The minimal DFA equivalent to ``dfa`` (states renumbered in BFS order)."""
    table = dfa.transitions
    num_states = table.shape[0]
    if num_states <= 1:
        return dfa
    if int((table >= 0).sum()) > MAX_HOPCROFT_TRANSITIONS:
        return merge_identical_states(dfa, budget, position)
    block_ids, num_blocks = kernels.hopcroft(
        np.ascontiguousarray(table), np.ascontiguousarray(dfa.is_accepting, dtype=bool)
    )
    if num_blocks == num_states:
        return dfa  # already minimal
    transitions, is_accepting, num_kept = kernels.quotient(
        np.ascontiguousarray(table), np.ascontiguousarray(dfa.is_accepting, dtype=bool),
        block_ids, num_blocks,
    )  # fmt: skip
    if num_kept == num_blocks:  # every block reached (a trimmed input): trimmed as it is
        return ByteDFA(
            transitions=transitions,
            byte_to_class=dfa.byte_to_class.astype(np.uint8),
            is_accepting=is_accepting,
        )
    return trim(transitions, dfa.byte_to_class, is_accepting)  # an untrimmed input's blocks


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_index=True, return_inverse=True)[1:]``, faster.

    Rows are grouped by a 64-bit hash (a sort of integers instead of row-wise lexicographic
    sorting of ``axis=0``); a hash collision is detected (some row differs from its group's
    first row) and answered by the exact ``axis=0`` form. Group order: by hash, not by row.
    """
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=rows.shape[1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        hashes = (rows.astype(np.uint64) * (weights | np.uint64(1))).sum(axis=1, dtype=np.uint64)
    _, first_index, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(rows, rows[first_index[inverse]]):
        _, first_index, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first_index, inverse


def merge_identical_states(
    dfa: ByteDFA,
    budget: CompileBudget,
    position: int | None = None,
    max_rounds: int = _MAX_MERGE_ROUNDS,
) -> ByteDFA:
    """Repeatedly merge states with identical rows and acceptance (a sound reduction).

    Merging states whose outgoing transitions and acceptance are equal never changes the
    language; iterating merges whole equivalent acyclic tails (suffix sharing), which is what
    large generated regexes mostly need. Not guaranteed minimal for equivalent cycles.
    """
    table = dfa.transitions
    accepting = dfa.is_accepting
    for _ in range(max_rounds):
        budget.check_time("reducing the automaton", position)
        signature = np.concatenate([table, accepting[:, None].astype(table.dtype)], axis=1)
        # keep the start state's group first: unique over rows, then map
        first_index, inverse = _unique_rows(signature)
        if len(first_index) == len(table):
            break
        start_group = inverse[0]
        order = np.argsort(first_index != first_index[start_group], kind="stable")
        position_of = np.empty(len(first_index), dtype=np.int64)
        position_of[order] = np.arange(len(first_index))
        new_of_old = position_of[inverse]
        rows = table[first_index[order]]
        table = np.where(rows >= 0, new_of_old[np.maximum(rows, 0)], DEAD).astype(np.int32)
        accepting = accepting[first_index[order]]
    return trim(table, dfa.byte_to_class, accepting)
