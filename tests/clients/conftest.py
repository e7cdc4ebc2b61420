"""Client-library tests: one formcast server (real SmolLM2) on loopback for the test module,
and a runner for the client scripts, each in its client venv (``make clients`` builds them).

The venvs are separate from formcast's because the libraries' pins conflict with each other
(see the requirements files). A missing venv fails the tests with the command that builds it:
``make test`` always builds them first, so a skip here could only hide a broken build.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MODEL = "smollm2-135m"
CLIENTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = CLIENTS_DIR.parents[1]
CLIENTS_VENVS = REPO_ROOT / ".venv-clients"
# liveness bound of one script run (import + one or two generations on a loaded 2-core CPU)
SCRIPT_TIMEOUT_S = 600
NUM_SHOWN_CHARS = 4000


def client_python(group: str) -> Path:
    """The python of client venv ``group``; fails the test if ``make clients`` has not built it."""
    python = CLIENTS_VENVS / group / "bin" / "python"
    if not (CLIENTS_VENVS / group / ".installed").is_file() or not python.is_file():
        pytest.fail(
            f"client venv {python.parent.parent} is missing or incomplete: run `make clients` "
            f"(or `make test`, which builds it) from {REPO_ROOT}",
            pytrace=False,
        )
    return python


@dataclass
class ClientRunner:
    """Runs ``<script> <case>`` with a client venv's python against the running server."""

    base_url: str

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            FORMCAST_BASE_URL=self.base_url + "/v1",
            FORMCAST_MODEL=MODEL,
            # litellm fetches its model price map from the internet unless told not to
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            # anything a library still sends off the machine goes to a closed loopback port
            HTTP_PROXY="http://127.0.0.1:9",
            HTTPS_PROXY="http://127.0.0.1:9",
            NO_PROXY="127.0.0.1,localhost",
        )
        env.pop("PYTHONPATH", None)
        return env

    def run(self, group: str, script: str, case: str) -> dict[str, Any]:
        """The JSON object the script printed last; fails the test on a non-zero exit."""
        command = [str(client_python(group)), str(CLIENTS_DIR / script), case]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=self.environment(),
                cwd=CLIENTS_DIR,
                timeout=SCRIPT_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{script} {case} did not finish in {SCRIPT_TIMEOUT_S} s: {exc}")
        if done.returncode != 0:
            pytest.fail(
                f"{script} {case} exited with {done.returncode}\n"
                f"stdout:\n{done.stdout[-NUM_SHOWN_CHARS:]}\nstderr:\n{done.stderr[-NUM_SHOWN_CHARS:]}",
                pytrace=False,
            )
        last_line = done.stdout.strip().splitlines()[-1]
        payload = json.loads(last_line)
        assert payload["case"] == case
        return payload


@pytest.fixture(scope="module")
def clients(request) -> ClientRunner:
    """A `ClientRunner` with a server running for the test module (both venvs checked first).

    Module scope: the server stops before the next module's tests (tests/server starts its
    own), so two models are never held at once.
    """
    for group in ("instructor", "frameworks"):
        client_python(group)
    from formcast.server import BackgroundServer, build_engine

    engine = build_engine(MODEL, max_num_seqs=4, max_model_len=2048, num_kv_blocks=256)
    with BackgroundServer(engine, MODEL) as running:
        yield ClientRunner(running.base_url)
