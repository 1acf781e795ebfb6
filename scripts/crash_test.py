#!/usr/bin/env python3
"""The long crash test: two MSH processes exchange messages (1,000 by default) while each is killed with
SIGKILL at random moments and restarted; then the receiving application must hold each message exactly
once and the sender every message as acknowledged. Prints the outcome; exit status 0 when it held.

    .venv/bin/python scripts/crash_test.py [--messages 1000] [--kill-for 60] [--seed N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from msh.faults.crash import run_crash_test


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--kill-for", type=float, default=60.0, help="seconds during which processes are killed")
    parser.add_argument("--mean-gap", type=float, default=1.0, help="mean seconds between kills")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", metavar="DIR", default=None, help="work in DIR and keep it (stores and logs)")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="msh-crash-"))
    try:
        report = run_crash_test(
            work / "run",
            messages=args.messages,
            kill_for=args.kill_for,
            mean_gap=args.mean_gap,
            seed=args.seed,
            settle_timeout=300,
            progress=lambda text: print(text, flush=True),
        )
        print(report.summary())
        return 0 if report.ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
