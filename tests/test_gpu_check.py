"""benchmarks/gpu_check.py runs end to end on CPU with ``--dry-run`` (small shapes, the torch
attention path, Triton kernels in the interpreter), and its JSON report says every section
ran and passed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("kernels", "parity", "kv_budget", "throughput", "constrained", "speculative")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu-check") / "report.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry-run", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.is_file(), (
        f"no report (rc {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    )
    data = json.loads(out.read_text())
    assert run.returncode == (0 if data["passed"] else 1)
    assert "gpu_check on cpu: PASSED" in run.stdout, run.stdout[-3000:]
    return data


@pytest.mark.slow
def test_every_section_ran_and_passed(report):
    assert report["dry_run"] is True and report["device"] == "cpu"
    for name in (*SECTIONS, "step_costs", "breakages"):
        section = report["sections"][name]
        assert section["passed"] is True, (name, section)
    assert report["passed"] is True


@pytest.mark.slow
def test_every_kernel_was_compared_with_its_reference(report):
    checks = report["sections"]["kernels"]["checks"]
    for kernel in ("store_kv", "decode", "prefill", "tree"):
        for dtype in ("float32", "bfloat16"):
            assert (
                checks[f"{kernel}/{dtype}"]["max_error"] <= checks[f"{kernel}/{dtype}"]["tolerance"]
            )
    for kernel in ("bitmask", "mask_scale", "race"):
        assert any(name.startswith(f"{kernel}/") for name in checks), kernel


@pytest.mark.slow
def test_sections_report_their_measurements(report):
    sections = report["sections"]
    parity = sections["parity"]
    assert parity["fp32_identical"] == "2/2"
    assert parity["bf16_ours_vs_hf_fp32"] >= parity["bf16_hf_vs_hf_fp32"] - parity["bf16_slack"]
    assert sections["kv_budget"]["source"] == "cpu_default"
    assert set(sections["throughput"]["smollm2_135m_shape"]) == {"batch_1", "batch_4", "batch_8"}
    constrained = sections["constrained"]
    assert constrained["ratio"] > 0
    for workload in ("json_jump_forward", "json", "reasoning_json"):  # each vs same lengths
        assert constrained[workload]["invalid"] == 0 and constrained[workload]["ratio"] > 0
        assert constrained[workload]["complete"] != "0/4", workload
    speculative = sections["speculative"]
    for method in ("ngram", "self_draft", "ngram+grammar"):
        assert speculative[method]["identical"] is True, method
        assert speculative[method]["tokens_per_forward"] >= 1.0
    # no CUDA here: the sync count says why it was not taken; op counts were
    assert sections["step_costs"]["syncs_per_step"].startswith("skipped: no CUDA")
    assert sections["step_costs"]["aten_ops_per_step"] > 0
    profile = sections["host_profile"]
    for name in ("batch_8_plain", "batch_8_json_schema", "batch_4_plain", "batch_4_json_schema",
                 "batch_4_reasoning_json"):  # fmt: skip
        assert profile[name]["ms_per_step"] > 0 and profile[name]["top_own_time_per_step"]
        assert profile[name]["ms_per_step_unprofiled"] > 0
        assert profile[name]["top_formcast_cumulative_per_step"]
    breakages = sections["breakages"]
    assert "2 passed" in breakages["tests"] and breakages["block_size_refusals"] == 2
