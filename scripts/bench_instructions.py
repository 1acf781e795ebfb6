#!/usr/bin/env python3
"""Count the processor instructions one message costs partners A and B together: a figure that does not move
with the machine's load, for comparing two versions of the code on a noisy machine.

Partners A and B of the sample configuration (on the sample agreement without its SenderNonRepudiation:
nothing is signed) run as :class:`msh.runtime.msh.Msh` on one event loop and one thread, on the in-memory
transport of :mod:`msh.testing.network` and its fake clock (no socket, no TLS), each on its own SQLite file
(WAL, ``synchronous=FULL``) written by the network's inline writer (one transaction per unit of work, on
the loop's thread: no thread hand-over, so the same input gives the same instructions). A submits the
messages one at a time, each acknowledged before the next.

With ``--callgrind`` (the default when ``valgrind`` is installed) the script runs itself twice under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``: once with only the warm-up messages and once with
``--messages`` more, and prints the difference divided by ``--messages``: the instructions (Ir) of one
message, start-up, imports and warm-up left out. Two versions of the tree are compared by running each
(``PYTHONPATH=<tree>``). Two runs of one tree agree to about 0.1% (the hash of a path, a temporary folder's
name). Two trees can differ by about 1% for reasons other than the work of a message: a module-level list of
5,000 strings that nothing reads moved the count by 1.0%, by where objects land in memory. So only larger
differences say that work was removed (docs/benchmarks.md, sixth round). The cyclic garbage collector is
switched off during the counted messages (:func:`pause_collector`), and its work is not counted.

Without ``--callgrind`` it runs the exchange once, natively, and prints what was delivered (what the test
suite checks). What this figure leaves out: HTTP and TLS, signing, the group commit's sharing of a
transaction between messages (each unit commits alone here), and the processor's caches (an instruction
costs more in the real exchange than in this loop; ``scripts/bench_exchange.py --step-times`` shows how
much). Not a test: it asserts nothing.

    .venv/bin/python scripts/bench_instructions.py --messages 40
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
if str(ROOT / "scripts") not in sys.path:
    sys.path.append(str(ROOT / "scripts"))

WARMUP = 5
"""Messages exchanged before the counted ones (first-use caches, compiled statements), in both runs."""


def pause_collector() -> None:
    """Collect, then switch the cyclic garbage collector off until the exchange ends.

    With it on, the count moved with what was allocated before the counted messages, not with their work:
    when a collection of the oldest generation falls, and what it walks, depends on everything alive. A
    module-level list of 5,000 strings that no message touches added 2.7%; with the collector off during
    the counted messages, 1.0% (docs/benchmarks.md, sixth round). The count leaves the collector's work out."""
    gc.collect()
    gc.disable()


def exchange(messages: int) -> tuple[int, int]:
    """Exchange ``WARMUP + messages`` messages A -> B one at a time; (delivered, submitted)."""
    # The sample parties, agreement without signatures and messages of scripts/bench_store_steps.py.
    from bench_store_steps import settings, submission, unsigned_agreement

    from msh.engine import OutboundStatus
    from msh.store.sql import SqlStore
    from msh.testing.network import TestNetwork

    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        folder = Path(tmp)
        agreement = unsigned_agreement(folder)
        net = TestNetwork(seed=1)
        stores = [SqlStore.open(str(folder / f"{name}.db"), clock=net.clock) for name in "ab"]
        a = net.add("a", settings("a", agreement), store=stores[0])
        net.add("b", settings("b", agreement), store=stores[1])

        async def run() -> tuple[int, int]:
            await net.start()
            try:
                ids = []
                for n in range(WARMUP + messages):
                    if n == WARMUP:
                        pause_collector()
                    ids.append(await a.submit_async(submission(n)))
                    await net.settle()
                if messages == 0:
                    pause_collector()  # where the run with messages counted pauses it, before them
                delivered = 0
                for message_id in ids:
                    status = a.status(message_id)
                    if status is not None and status.state.status is OutboundStatus.DELIVERED:
                        delivered += 1
                return delivered, len(ids)
            finally:
                gc.enable()
                await net.close()
                for store in stores:
                    store.close()

        return asyncio.run(run())


def callgrind_total(messages: int, folder: Path) -> int:
    """The instructions of one run of this script under callgrind with ``messages`` counted messages."""
    out = folder / f"callgrind.{messages}.out"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--native",
            "--messages",
            str(messages),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None or "delivered" not in done.stdout:
        tail = done.stderr[-2000:]
        raise SystemExit(f"the run under callgrind failed (exit {done.returncode}):\n{done.stdout}\n{tail}")
    expected = f"delivered {WARMUP + messages} of {WARMUP + messages}"
    if expected not in done.stdout:
        raise SystemExit(f"the run under callgrind did not deliver every message: {done.stdout.strip()}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Instructions per message of partners A and B together, in one process, under callgrind "
        "(the run with --messages more messages less the run with none, divided by --messages).",
    )
    parser.add_argument("--messages", type=int, default=40, help="messages counted (default 40)")
    way = parser.add_mutually_exclusive_group()
    way.add_argument(
        "--callgrind", action="store_true", help="count instructions under valgrind (the default when installed)"
    )
    way.add_argument(
        "--native", action="store_true", help="run the exchange once, natively, and print what was delivered"
    )
    args = parser.parse_args()
    if args.messages < (0 if args.native else 1):  # the run with none counted is a native one, under callgrind
        parser.error("--messages must be at least 1")
    if args.native or (not args.callgrind and shutil.which("valgrind") is None):
        if not args.native:
            print("valgrind is not installed: the exchange runs natively, no instructions are counted")
        delivered, submitted = exchange(args.messages)
        print(f"delivered {delivered} of {submitted}")
        if delivered != submitted:
            raise SystemExit(1)
        return
    if shutil.which("valgrind") is None:
        parser.error("--callgrind needs valgrind (Debian package valgrind)")
    import msh

    print(f"tree: {Path(msh.__file__).resolve().parents[1]}; {WARMUP} warm-up messages, then {args.messages}")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        base = callgrind_total(0, Path(tmp))
        total = callgrind_total(args.messages, Path(tmp))
    print(f"instructions: {base:,} with none counted, {total:,} with {args.messages}")
    print(f"per message (A and B together): {(total - base) / args.messages:,.0f} Ir")


if __name__ == "__main__":
    main()
