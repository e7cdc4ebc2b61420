"""samplers tests: TRITON_INTERPRET is set before anything imports triton (kernels on CPU)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
