#!/usr/bin/env python3
"""Large payloads end to end between two real ``msh serve`` processes: peak memory of each process and MB/s.

What it runs (two partners of the demo agreement, durable SQLite stores, HTTPS with mutual TLS, both parties
signing and verifying, synchronous acknowledgments; partner B behind a proxy on 127.0.0.1, from
:mod:`msh.faults.pair`):

one large message (``--size`` MiB, 1024 by default)
    the payload file is written; ``msh send --payload FILE`` submits it into A's store (composed, signed and
    stored as streams); A's ``msh serve`` transmits it, the proxy loses B's answer (so B has stored it and A
    hears nothing); A resends the same stored bytes, B answers its duplicate with the acknowledgment it kept;
    ``msh inbox --take DIR`` writes B's copy to a folder, whose payload is checked byte for byte (SHA-256).

several large messages at once (``--many`` of ``--many-size`` MiB, 8 x 128 MiB by default)
    submitted together (one ``msh send`` process each, side by side), in flight together, taken at B the
    same way.

What it prints, for each phase: the time and MB/s (MiB of payload per second: of the submission, of the
transfer from the first submission to the last acknowledgment, of the take), and the peak resident memory
of every process: for the two ``msh serve`` processes their ``VmHWM`` from ``/proc/<pid>/status`` at the end
of the phase minus their resident size when idle (after start, before any traffic), for the short-lived
``msh send`` and ``msh inbox --take`` their ``ru_maxrss`` (which includes the interpreter's own size, about
60-80 MB, printed beside). The target: each process's growth under 100 MB, whatever the payload's size.

Each phase starts fresh partners in a fresh work folder (``--work`` keeps it; by default a temporary one is
removed). It needs about 5 x the payload in free disk space. Not a test: it asserts nothing but prints
"MISMATCH" if a payload did not arrive intact.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from msh.faults.pair import ACTION, PARTY_B, SERVICE, Pair, make_pair  # noqa: E402
from msh.faults.proxy import RunningProxy, run_in_thread  # noqa: E402
from msh.store import open_store  # noqa: E402

MiB = 1024 * 1024
_BLOCK = hashlib.sha256(b"large payload").digest() * 2048  # 64 KiB of pattern


def status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (VmRSS, VmHWM)."""
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    if found is None:
        raise RuntimeError(f"no {field} for process {pid}")
    return int(found.group(1))


def write_payload(path: Path, size: int, salt: int) -> str:
    """``size`` bytes of pattern (different for each ``salt``) into ``path``; their SHA-256."""
    digest = hashlib.sha256()
    head = salt.to_bytes(8, "big") * 8
    with path.open("wb") as f:
        f.write(head)
        digest.update(head)
        left = size - len(head)
        while left > 0:
            piece = _BLOCK[: min(left, len(_BLOCK))]
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


@dataclass
class Measured:
    seconds: float
    max_rss_kib: int
    stdout: str


def run_measured(cmd: list[str], *, timeout: float) -> Measured:
    """Run ``cmd`` to its end; its wall time, peak RSS (``ru_maxrss``) and output."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ})
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{' '.join(cmd[:4])} did not end within {timeout:g} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{text}")
    return Measured(time.monotonic() - started, usage.ru_maxrss, text)


def msh(*args: str) -> list[str]:
    return [sys.executable, "-m", "msh.cli", *args]


def outbound_statuses(pair: Pair, message_ids: list[str]) -> dict[str, str]:
    with open_store(str(pair.a.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        found = {}
        for message_id in message_ids:
            stored = tx.get_outbound(message_id)
            found[message_id] = "missing" if stored is None else stored.state.status.value
        return found


def attempts(pair: Pair, message_ids: list[str]) -> int:
    with open_store(str(pair.a.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        return sum(stored.state.attempts for m in message_ids if (stored := tx.get_outbound(m)) is not None)


@contextmanager
def partners(work: Path) -> Iterator[tuple[Pair, RunningProxy]]:
    # The answer's wait is for B to parse, verify and store a large body after its last byte; the first
    # resend must come after it (sending.first_resend_timeout > sending.http_timeout).
    pair = make_pair(
        work / "pair", retries=3, retry_interval="PT5S", first_resend="PT31S", http_timeout="PT30S", lease="PT5M"
    )
    with run_in_thread(("127.0.0.1", pair.b_public_port), ("127.0.0.1", pair.b.port)) as proxy:
        try:
            pair.b.start()
            pair.a.start()
            yield pair, proxy
        finally:
            pair.stop()


def pid_of(partner: object) -> int:
    proc = getattr(partner, "proc", None)
    if proc is None:
        raise RuntimeError("partner not running")
    return int(proc.pid)


def phase(work: Path, sizes: list[int], *, lose_answer: bool, title: str, timeout: float) -> None:
    print(f"\n== {title}: {len(sizes)} message(s), {sum(sizes) / MiB:.0f} MiB of payload in all")
    work.mkdir(parents=True, exist_ok=True)
    files, digests = [], []
    for i, size in enumerate(sizes):
        path = work / f"payload-{i}.bin"
        digests.append(write_payload(path, size, i))
        files.append(path)
    with partners(work) as (pair, proxy):
        time.sleep(1.0)  # let both settle after their start
        a_pid, b_pid = pid_of(pair.a), pid_of(pair.b)
        idle = {"A": status_kib(a_pid, "VmRSS"), "B": status_kib(b_pid, "VmRSS")}
        if lose_answer:
            proxy.drop_next_response_after(min(sizes))
        started = time.monotonic()

        def submit(path: Path) -> Measured:
            command = msh("send", "--config", str(pair.a.config), "--to", PARTY_B[0], "--service", SERVICE)
            command += ["--action", ACTION, "--payload", f"{path}=application/octet-stream"]
            return run_measured(command, timeout=timeout)

        # All at once (one msh send each), so that their transmissions overlap at A and at B.
        with ThreadPoolExecutor(max_workers=len(files)) as pool:
            sent = list(pool.map(submit, files))
        message_ids = [s.stdout.strip().splitlines()[-1].strip() for s in sent]
        send_rss = [s.max_rss_kib for s in sent]
        submitted = time.monotonic() - started
        deadline = time.monotonic() + timeout
        wal_peak = 0
        while True:
            wal_peak = max([wal_peak, *(p.stat().st_size for p in (work / "pair").glob("*.sqlite-wal") if p.exists())])
            statuses = outbound_statuses(pair, message_ids)
            if all(s in ("delivered", "failed") for s in statuses.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not delivered within {timeout:g} s: {statuses}")
            time.sleep(0.5)
        delivered = time.monotonic() - started
        transmissions = attempts(pair, message_ids)
        peak = {"A": status_kib(a_pid, "VmHWM"), "B": status_kib(b_pid, "VmHWM")}
        taken_dir = work / "taken"
        take = run_measured(
            msh("inbox", "--config", str(pair.b.config), "--take", str(taken_dir), "--json"), timeout=timeout
        )
        peak["B"] = max(peak["B"], status_kib(b_pid, "VmHWM"))
        stats = proxy.stats()
    intact = 0
    for meta in taken_dir.glob("*/message.json"):
        for payload in json.loads(meta.read_text())["payloads"]:
            if payload.get("sha256") in digests:
                got = hashlib.sha256()
                with (meta.parent / payload["file"]).open("rb") as f:
                    while piece := f.read(MiB):
                        got.update(piece)
                intact += got.hexdigest() in digests
    total = sum(sizes) / MiB
    print(
        f"  statuses at A: {sorted(statuses.values())}; transmissions: {transmissions} (answers dropped by "
        f"the proxy: {stats.responses_dropped})"
    )
    print(
        f"  payloads taken at B intact (SHA-256): {intact} of {len(sizes)}"
        + ("" if intact == len(sizes) else "  MISMATCH")
    )
    print(f"  submit (msh send):   {submitted:7.1f} s  {total / submitted:7.1f} MB/s")
    print(
        f"  submit -> delivered: {delivered:7.1f} s  {total / delivered:7.1f} MB/s (transfer, B's storing and"
        f" any resend included)"
    )
    print(f"  take (msh inbox):    {take.seconds:7.1f} s  {total / take.seconds:7.1f} MB/s")
    for name in ("A", "B"):
        grow = (peak[name] - idle[name]) / 1024
        print(
            f"  msh serve {name}: idle {idle[name] / 1024:6.1f} MB, peak {peak[name] / 1024:6.1f} MB, "
            f"growth {grow:6.1f} MB  {'ok' if grow < 100 else 'OVER 100 MB'}"
        )
    print(f"  msh send:     peak {max(send_rss) / 1024:6.1f} MB (whole process; the largest of {len(send_rss)})")
    print(f"  msh inbox --take: peak {take.max_rss_kib / 1024:6.1f} MB (whole process)")
    print(f"  largest SQLite WAL seen while sending (A and B): {wal_peak / MiB:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB of the one large message (default 1024)")
    parser.add_argument("--many", type=int, default=8, help="messages in flight together (default 8; 0: skip)")
    parser.add_argument("--many-size", type=int, default=128, help="MiB of each of them (default 128)")
    parser.add_argument("--work", type=Path, help="keep the work folder here (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step before giving up")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="msh-large-"))
    try:
        if args.size > 0:
            phase(
                work / "one",
                [args.size * MiB],
                lose_answer=True,
                title="one large message, its answer lost once",
                timeout=args.timeout,
            )
            shutil.rmtree(work / "one", ignore_errors=True)
        if args.many > 0:
            phase(
                work / "many",
                [args.many_size * MiB] * args.many,
                lose_answer=False,
                title="large messages in flight together",
                timeout=args.timeout,
            )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
