"""MedusaHeads: K extra next-next-token heads on the target's last hidden state.

Head ``i`` (0-based) reads the final-norm hidden state ``h_t`` of the last computed position
``t`` and predicts the token at ``t + i + 2`` (the target's own LM head predicts ``t + 1``).
Each head is one residual block followed by the target's frozen, shared LM head::

    z_i = h + SiLU(W_i h + b_i)          # (H,)   W_i zero-initialised: untrained z_i == h
    logits_i = E[token_ids] z_i          # (Vs,)  E: the LM head (V, H), token_ids: subset (Vs,)

Only ``W_i, b_i`` are trained and shipped (``K * (H^2 + H)`` numbers: ~2 MB in fp16 for
SmolLM2-135M with K = 3). The optional token subset (the most frequent tokens of the text the
model generates, chosen at training time and saved with the heads) keeps the LM-head pass
cheap: ``Vs / V`` of the full matmul. ``forward`` still returns logits over the full vocabulary
(ids outside the subset get ``-inf``) so callers never remap ids; ``top_candidates`` computes
only the subset logits. All K heads' rows go through each matmul together.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from formcast.errors import EngineConfigError, ModelLoadError

FORMAT_NAME = "formcast-medusa-heads"
FORMAT_VERSION = 1
_ASSET_NAMES = {"smollm2-135m": "medusa-smollm2-135m.safetensors"}
# folder / file names of the same model (the converted GGUF folder, the HF repo name)
_ASSET_ALIASES = {"smollm2-135m-instruct": "smollm2-135m"}


class MedusaHeads(nn.Module):
    """Medusa heads sharing the target's frozen LM head.

    Parameters
    ----------
    hidden_size : int
        Hidden size ``H`` of the target model.
    num_heads : int
        Number of heads ``K``; head ``i`` predicts the token at offset ``i + 2``.
    lm_head_weight : torch.Tensor
        The target's LM head ``(V, H)`` (for tied models: the token embedding). Not copied
        unless a subset is given; never trained, never saved with the heads.
    token_ids : torch.Tensor, optional
        Sorted unique token ids ``(Vs,)`` the heads may predict; default: the whole vocabulary.

    Attributes
    ----------
    weight : nn.Parameter
        ``(K, H, H)`` residual-block matrices (zero at initialisation).
    bias : nn.Parameter
        ``(K, H)`` residual-block biases (zero at initialisation).
    token_ids : torch.Tensor
        ``(Vs,)`` int64 ids of the subset (all ids when no subset).
    metadata : dict
        Free-form training summary, written by `save`.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        lm_head_weight: torch.Tensor,
        token_ids: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(num_heads, int) or num_heads < 1:
            raise EngineConfigError(f"MedusaHeads num_heads={num_heads!r} must be an int >= 1")
        if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != hidden_size:
            raise ModelLoadError(
                f"MedusaHeads: lm_head_weight has shape {tuple(lm_head_weight.shape)}, "
                f"expected (vocab_size, hidden_size={hidden_size})"
            )
        self.hidden_size = int(hidden_size)
        self.num_heads = int(num_heads)
        self.vocab_size = int(lm_head_weight.shape[0])
        dtype, device = lm_head_weight.dtype, lm_head_weight.device
        self.weight = nn.Parameter(
            torch.zeros(num_heads, hidden_size, hidden_size, dtype=dtype, device=device)
        )
        self.bias = nn.Parameter(torch.zeros(num_heads, hidden_size, dtype=dtype, device=device))
        if token_ids is None:
            ids = torch.arange(self.vocab_size, device=device)
            subset_weight = lm_head_weight.detach()
        else:
            ids = _check_token_ids(token_ids, self.vocab_size).to(device)
            subset_weight = lm_head_weight.detach()[ids].contiguous()
        self.register_buffer("token_ids", ids, persistent=False)  # (Vs,)
        self.register_buffer("subset_weight", subset_weight, persistent=False)  # (Vs, H)
        self.metadata: dict[str, Any] = {}

    @property
    def num_subset_tokens(self) -> int:
        """``Vs``: how many token ids the heads can predict."""
        return int(self.token_ids.shape[0])

    @property
    def is_subset(self) -> bool:
        """True when the heads predict a strict subset of the vocabulary."""
        return self.num_subset_tokens < self.vocab_size

    # -- math -------------------------------------------------------------------------------

    def head_states(self, hidden: torch.Tensor) -> torch.Tensor:
        """Residual-block outputs ``(K, N, H)`` for hidden rows ``(N, H)``."""
        self._check_hidden(hidden)
        hidden = hidden.to(self.weight.dtype)
        num_rows = hidden.shape[0]
        k, h = self.num_heads, self.hidden_size
        # all heads in one matmul: (K*H, H) @ (H, N) -> (K*H, N); for a few rows this GEMM
        # form is much faster on CPU than F.linear's (N, H) @ (H, K*H)
        pre = (self.weight.reshape(k * h, h) @ hidden.T).reshape(k, h, num_rows)
        pre = pre.transpose(1, 2) + self.bias[:, None, :]  # (K, N, H)
        return hidden[None] + F.silu(pre)

    def subset_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``(K, N, Vs)`` over the subset, column ``j`` = ``token_ids[j]``."""
        states = self.head_states(hidden)  # (K, N, H)
        k, n, h = states.shape
        flat = states.reshape(k * n, h)
        # (Vs, H) @ (H, K*N) -> (Vs, K*N): every head's rows in one pass over the weight
        logits = (self.subset_weight @ flat.T).T if k * n <= 16 else flat @ self.subset_weight.T
        return logits.reshape(k, n, -1).float()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``(K, N, V)`` over the full vocabulary; ids outside the subset: -inf.

        Parameters
        ----------
        hidden : torch.Tensor
            ``(N, H)`` final-norm hidden states of the last computed positions.
        """
        sub = self.subset_logits(hidden)  # (K, N, Vs)
        if not self.is_subset:
            return sub
        out = sub.new_full((*sub.shape[:2], self.vocab_size), float("-inf"))
        out[..., self.token_ids] = sub
        return out

    @torch.no_grad()
    def top_candidates(self, hidden: torch.Tensor, top_k: int | Sequence[int]) -> torch.Tensor:
        """The ``max_k`` best token ids of every head, best first: ``(K, N, max_k)`` int64.

        Parameters
        ----------
        hidden : torch.Tensor
            ``(N, H)`` final-norm hidden states.
        top_k : int or sequence of int
            One k for all heads, or one per head (the result has ``max(top_k)`` columns for
            every head; head ``i``'s first ``top_k[i]`` columns are its candidates, later
            columns are its next-best ids).
        """
        ks = [top_k] * self.num_heads if isinstance(top_k, int) else list(top_k)
        if len(ks) != self.num_heads or any(not isinstance(k, int) or k < 1 for k in ks):
            raise EngineConfigError(
                f"MedusaHeads.top_candidates top_k={top_k!r} must be an int >= 1 or "
                f"{self.num_heads} ints >= 1 (one per head)"
            )
        max_k = max(ks)
        if max_k > self.num_subset_tokens:
            raise EngineConfigError(
                f"MedusaHeads.top_candidates top_k={max_k} exceeds the "
                f"{self.num_subset_tokens} tokens the heads can predict"
            )
        sub = self.subset_logits(hidden)  # (K, N, Vs)
        columns = sub.topk(max_k, dim=-1).indices  # (K, N, max_k), sorted best first
        return self.token_ids[columns]

    def _check_hidden(self, hidden: torch.Tensor) -> None:
        if hidden.dim() != 2 or hidden.shape[1] != self.hidden_size:
            raise EngineConfigError(
                f"MedusaHeads expects hidden states (N, {self.hidden_size}), "
                f"got {tuple(hidden.shape)}"
            )

    # -- files ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str], *, base_model: str) -> None:
        """Write the trained blocks (fp16) and the subset ids as safetensors with metadata.

        Metadata: format, ``num_heads``, ``hidden_size``, ``vocab_size``, ``base_model`` and
        ``training`` (a JSON summary from ``self.metadata``). The LM head is not saved.
        """
        from safetensors.torch import save_file

        tensors = {
            "weight": self.weight.detach().to("cpu", torch.float16).contiguous(),
            "bias": self.bias.detach().to("cpu", torch.float16).contiguous(),
        }
        if self.is_subset:
            tensors["token_ids"] = self.token_ids.to("cpu", torch.int32).contiguous()
        meta = {
            "format": FORMAT_NAME,
            "format_version": str(FORMAT_VERSION),
            "num_heads": str(self.num_heads),
            "hidden_size": str(self.hidden_size),
            "vocab_size": str(self.vocab_size),
            "base_model": str(base_model),
            "training": json.dumps(self.metadata, sort_keys=True),
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=meta)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        lm_head_weight: torch.Tensor,
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> MedusaHeads:
        """Load heads saved by `save` onto a target's LM head ``(V, H)``.

        Raises
        ------
        ModelLoadError
            If the file is missing or not a heads file, or its hidden / vocabulary size does
            not match ``lm_head_weight`` (the heads were trained for another model).
        """
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(f"Medusa heads file {path} does not exist")
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
        except Exception as exc:  # safetensors raises its own types for corrupt files
            raise ModelLoadError(f"{path} is not a readable safetensors file: {exc}") from exc
        if meta.get("format") != FORMAT_NAME or "weight" not in tensors:
            raise ModelLoadError(f"{path} is not a formcast Medusa heads file")
        num_heads, hidden_size = int(meta["num_heads"]), int(meta["hidden_size"])
        vocab_size = int(meta["vocab_size"])
        base = meta.get("base_model", "?")
        if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != hidden_size:
            raise ModelLoadError(
                f"Medusa heads {path} were trained for hidden size {hidden_size} "
                f"(base model {base!r}), but the LM head has shape "
                f"{tuple(lm_head_weight.shape)}"
            )
        if lm_head_weight.shape[0] != vocab_size:
            raise ModelLoadError(
                f"Medusa heads {path} were trained for vocab size {vocab_size} "
                f"(base model {base!r}), but the LM head has {lm_head_weight.shape[0]} rows"
            )
        if tuple(tensors["weight"].shape) != (num_heads, hidden_size, hidden_size):
            raise ModelLoadError(
                f"{path}: weight shape {tuple(tensors['weight'].shape)} disagrees with its "
                f"metadata (num_heads={num_heads}, hidden_size={hidden_size})"
            )
        token_ids = tensors.get("token_ids")
        heads = cls(
            hidden_size,
            num_heads,
            lm_head_weight.detach().to(device=device, dtype=dtype),
            None if token_ids is None else token_ids.long(),
        )
        with torch.no_grad():
            heads.weight.copy_(tensors["weight"].to(dtype))
            heads.bias.copy_(tensors["bias"].to(dtype))
        heads.metadata = json.loads(meta.get("training", "{}"))
        heads.metadata["base_model"] = base
        return heads.eval().requires_grad_(False)


def _check_token_ids(token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    ids = torch.as_tensor(token_ids).long().flatten()
    if ids.numel() == 0:
        raise EngineConfigError("MedusaHeads token_ids is empty")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise EngineConfigError(
            f"MedusaHeads token_ids must lie in [0, {vocab_size}), "
            f"got range [{int(ids.min())}, {int(ids.max())}]"
        )
    if ids.numel() > 1 and not bool((ids[1:] > ids[:-1]).all()):
        raise EngineConfigError("MedusaHeads token_ids must be sorted and unique")
    return ids


def assets_dir() -> Path:
    """The folder of the shipped heads (``formcast/engine/assets``)."""
    here = Path(__file__).parents[1] / "assets"
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "assets"


def default_medusa_heads_path(model_name: str | os.PathLike[str]) -> Path | None:
    """The shipped trained heads for a known base model, else None.

    ``model_name`` is a registry alias (``"smollm2-135m"``) or the model's folder / file
    (e.g. the converted ``SmolLM2-135M-Instruct...`` cache folder).
    """
    name = Path(os.fspath(model_name)).name.lower()
    key = name if name in _ASSET_NAMES else None
    if key is None:
        for alias, target in _ASSET_ALIASES.items():
            if name.startswith(alias):
                key = target
                break
    if key is None:
        return None
    path = assets_dir() / _ASSET_NAMES[key]
    return path if path.is_file() else None
