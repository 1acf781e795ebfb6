#!/usr/bin/env python3
"""The long end-to-end test of the application interfaces: a sending application that crashes and retries
at random points submits 1,000 messages (by default) through MSH A's REST interface, a receiving application
that crashes at random points takes them from MSH B's REST inbox; every message must reach the receiving
application exactly once (msh.faults.app_e2e). Prints the figures; exit status 0 when it held.

    .venv/bin/python scripts/app_e2e.py [--count 1000] [--crash 0.05] [--seed N] [--work DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from msh.faults.app_e2e import main

if __name__ == "__main__":
    raise SystemExit(main(["run", *sys.argv[1:]]))
