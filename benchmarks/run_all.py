"""Run every benchmark script in this folder (``make bench``), one after another.

Each ``bench_*.py`` measures formcast and its peers in the same run and prints a table; the
numbers worth keeping are copied into RESULTS.md with the command and the machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    scripts = sorted(here.glob("bench_*.py"))
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.call([sys.executable, str(script), *sys.argv[1:]]) != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
