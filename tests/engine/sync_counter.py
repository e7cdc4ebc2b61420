"""`SyncCounter`: what would make a GPU step wait for the device, counted on the CPU.

On a GPU the host waits for the device when it reads a device value (``item``, ``bool``,
``tolist``, ``numpy``, a copy to the CPU, or an op whose output size depends on the data:
``nonzero``, boolean-mask indexing, ``unique`` ...) and when it copies pageable host memory
to the device (a blocking copy). The CPU has no such waits, so their causes are counted where
they are made:

- ``reads``: ops that need a device value on the host, seen by a `TorchDispatchMode`, plus
  ``Tensor.tolist`` / ``Tensor.numpy`` / ``Tensor.__array__`` calls (they read memory without
  an op). On the CPU every tensor is host memory, so a read of a tensor the step built on the
  host would count too: the engine keeps host-side data in numpy and Python objects.
- ``cpu_only_reads``: the same, made inside a CPU-only fast path: a function whose name ends
  in ``_cpu`` (DESIGN: "a CPU-specific fast path says so in its name"), which a GPU never runs.
- ``blocking_copies``: ``Tensor.to`` / ``Tensor.cuda`` with a target device and without
  ``non_blocking=True``, and ``torch.tensor`` / ``torch.as_tensor`` of host data with a
  device. The step's transfers go through ``formcast.samplers.batch.to_device``, which copies
  with ``non_blocking=True`` from pinned memory (and not at all on the CPU).

Only the thread that enters the counter is observed (the dispatch mode is thread-local; the
mask worker fills host memory in its own thread).
"""

from __future__ import annotations

import sys
import threading
from types import FrameType

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# ops whose result (or output size) the host must read from the device
_READ_OPS = {
    aten._local_scalar_dense.default,  # item(), bool(), int(), float()
    aten.is_nonzero.default,
    aten.equal.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten.bincount.default,
    aten.histc.default,
}
_INDEX_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}
_COPY_OPS = {aten._to_copy.default, aten.copy_.default}
_THIS_FILE = __file__


def _caller(frame: FrameType | None) -> str:
    """``file:line function`` of the innermost frame outside torch and this module."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name != _THIS_FILE and "/torch/" not in name:
            short = "/".join(name.split("/")[-2:])
            return f"{short}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def _in_cpu_path(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name.endswith("_cpu"):
            return True
        frame = frame.f_back
    return False


def _is_bool_index(indices) -> bool:
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices
    )


class SyncCounter(TorchDispatchMode):
    """Context manager recording device reads and blocking copies (see module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.cpu_only_reads: list[str] = []
        self.blocking_copies: list[str] = []
        self._thread = threading.get_ident()
        self._saved: list[tuple[object, str, object]] = []

    # -- device reads ------------------------------------------------------------------------

    def _read(self, what: str) -> None:
        frame = sys._getframe(1)
        entry = f"{what} at {_caller(frame)}"
        (self.cpu_only_reads if _in_cpu_path(frame) else self.reads).append(entry)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _READ_OPS or "unique" in func.name():
            self._read(func.name())
        elif func in _INDEX_OPS and _is_bool_index(args[1]):
            self._read(f"{func.name()} with a boolean mask")
        elif func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            self._read(func.name())
        elif func in _COPY_OPS:
            source = args[1] if func is aten.copy_.default else args[0]
            target = args[0].device if func is aten.copy_.default else kwargs.get("device")
            if source.device.type != "cpu" and target is not None and target.type == "cpu":
                self._read(f"{func.name()} to the CPU")
        return func(*args, **kwargs)

    # -- patched tensor methods and factories ------------------------------------------------

    def _patch(self, owner: object, name: str, wrapper_of) -> None:
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, wrapper_of(original))

    def _observed(self) -> bool:
        return threading.get_ident() == self._thread

    def _reader(self, what: str):
        def wrapper_of(original):
            def wrapper(tensor, *args, **kwargs):
                if self._observed():
                    self._read(f"Tensor.{what}")
                return original(tensor, *args, **kwargs)

            return wrapper

        return wrapper_of

    def _blocking(self, what: str) -> None:
        self.blocking_copies.append(f"{what} at {_caller(sys._getframe(2))}")

    def _to_wrapper_of(self, original):
        def to(tensor, *args, **kwargs):
            if self._observed():
                options = {k: v for k, v in kwargs.items() if k != "copy"}  # not a target
                device, _, non_blocking, _ = torch._C._nn._parse_to(*args, **options)
                if device is not None and not non_blocking:
                    self._blocking(f"Tensor.to({device}) without non_blocking")
            return original(tensor, *args, **kwargs)

        return to

    def _cuda_wrapper_of(self, original):
        def cuda(tensor, *args, **kwargs):
            if self._observed() and not kwargs.get("non_blocking", False):
                self._blocking("Tensor.cuda() without non_blocking")
            return original(tensor, *args, **kwargs)

        return cuda

    def _factory_wrapper_of(self, name: str):
        def wrapper_of(original):
            def factory(data, *args, **kwargs):
                if (
                    self._observed()
                    and kwargs.get("device") is not None
                    and not isinstance(data, torch.Tensor)
                ):
                    self._blocking(f"torch.{name}(host data, device=...)")
                return original(data, *args, **kwargs)

            return factory

        return wrapper_of

    def __enter__(self) -> SyncCounter:
        self._patch(torch.Tensor, "tolist", self._reader("tolist"))
        self._patch(torch.Tensor, "numpy", self._reader("numpy"))
        self._patch(torch.Tensor, "__array__", self._reader("__array__"))
        self._patch(torch.Tensor, "to", self._to_wrapper_of)
        self._patch(torch.Tensor, "cuda", self._cuda_wrapper_of)
        self._patch(torch, "tensor", self._factory_wrapper_of("tensor"))
        self._patch(torch, "as_tensor", self._factory_wrapper_of("as_tensor"))
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        try:
            super().__exit__(*exc)
        finally:
            while self._saved:
                owner, name, original = self._saved.pop()
                setattr(owner, name, original)
