"""End to end through the application interfaces: applications that crash and retry, exactly once.

Two real ``msh serve`` processes (A and B, :mod:`msh.faults.pair`) serve their REST interfaces on free
ports of 127.0.0.1. A *sending application* (a process of its own, speaking HTTP with the standard
library only, as any application would) submits ``count`` messages to A's REST interface, each with its
own ``Message-ID`` and ``MsgCreate``, which it writes to its journal before the first try (Certified HTTP:
"the client will persist the local time of sending"). It kills itself (``os._exit``) at random points: before
a POST, after a POST whose answer it has not recorded yet, and it sends some requests twice (a lost
answer, retried). Restarted, it carries on from its journal with the same pairs.

A *receiving application* takes the messages from B's REST inbox (long poll, take under a lease, store,
``DELETE``) and dies at random points too: after taking, after storing before the ``DELETE``, after the
``DELETE``. It stores each message under its MessageId, atomically (a message offered again after a crash
between storing and the ``DELETE`` is recognised by its MessageId and only acknowledged).

The check: A committed exactly ``count`` messages (no repeat became a second submission); the receiving
application holds exactly ``count`` messages, one per index, each with the payload the sender sent, and
B's inbox has them all acknowledged. ``python -m msh.faults.app_e2e run --count 1000`` prints the figures.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["AppReport", "run_app_e2e"]

TOKEN = "e2e-application-token-0123456789"
CRASH = 3  # exit status of an application that killed itself on purpose


def _msg_create(moment: datetime) -> str:
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return f"{days[moment.weekday()]}, {moment.day:02d} {months[moment.month - 1]} {moment:%Y %H:%M:%S} GMT"


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def _call(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body, method=method, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _maybe_die(rng: random.Random, p: float) -> None:
    if rng.random() < p:
        os._exit(CRASH)


# -- the sending application


def sender(api: str, journal: Path, count: int, crash: float, seed: int) -> int:
    """Submit messages 0..count-1 exactly once (see the module docs); 0 when all are submitted."""
    rng = random.Random(seed ^ os.getpid())
    journal.mkdir(parents=True, exist_ok=True)
    repeats = 0
    for i in range(count):
        done = journal / f"{i:06d}.done"
        if done.exists():
            continue
        pending = journal / f"{i:06d}.pair"
        if not pending.exists():  # a new request: its pair is durable before the first try
            pair = {"messageId": f"urn:uuid:{uuid.uuid4()}", "msgCreate": _msg_create(datetime.now(UTC))}
            _write_atomically(pending, json.dumps(pair).encode())
        pair = json.loads(pending.read_bytes())
        body = json.dumps(
            {
                "to": {"partyId": "987654321", "type": "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"},
                "service": "urn:example:services:ordering",
                "action": "NewOrder",
                "payloads": [
                    {"contentType": "application/xml", "data": base64.b64encode(f"<order n='{i}'/>".encode()).decode()}
                ],
            }
        ).encode()
        headers = {"Content-Type": "application/json", "Message-ID": pair["messageId"], "MsgCreate": pair["msgCreate"]}
        _maybe_die(rng, crash / 2)  # before the POST
        answers = set()
        for _ in range(2 if rng.random() < 0.1 else 1):  # sometimes the answer is "lost": sent again
            while True:
                try:
                    status, answer = _call("POST", f"{api}/messages", body, headers)
                except OSError:
                    time.sleep(0.2)
                    continue
                if status in (201, 200):
                    break
                if status in (503, 502, 504):
                    time.sleep(0.2)
                    continue
                print(f"sender: message {i}: HTTP {status}: {answer.decode(errors='replace')}", file=sys.stderr)
                return 1
            answers.add(answer)
            _maybe_die(rng, crash / 2)  # after the POST, its answer not yet recorded
        if len(answers) != 1:
            print(f"sender: message {i}: a repeat got another answer", file=sys.stderr)
            return 1
        repeats += 1 if len(answers) == 1 else 0
        _write_atomically(done, answers.pop())
    return 0


# -- the receiving application


def receiver(api: str, store: Path, count: int, crash: float, seed: int) -> int:
    """Take messages until ``count`` are stored (see the module docs); 0 then."""
    rng = random.Random(seed ^ os.getpid() ^ 0x5EED)
    store.mkdir(parents=True, exist_ok=True)
    seen_again = store / "seen-again.log"
    while True:
        try:
            status, body = _call("GET", f"{api}/inbox?wait=2&limit=20")
            items = json.loads(body)["items"] if status == 200 else None
            if items == [] and len(list(store.glob("*.msg"))) >= count:
                # all stored; done once nothing is held under a lease either (a message taken by a run that
                # died before its DELETE comes back when the lease runs out, and is acknowledged then)
                status, body = _call("GET", f"{api}/inbox?view=leased&limit=1")
                if status == 200 and json.loads(body)["items"] == []:
                    return 0
                time.sleep(0.5)
                continue
        except OSError:
            time.sleep(0.2)
            continue
        if items is None:
            time.sleep(0.2)
            continue
        for item in items:
            status, taken = _call("GET", f"{api}/inbox/{item['id']}?format=json")
            if status in (409, 410):  # another take got it first, or it was settled meanwhile
                continue
            if status != 200:
                print(f"receiver: take {item['id']}: HTTP {status}: {taken.decode(errors='replace')}", file=sys.stderr)
                return 1
            _maybe_die(rng, crash / 3)  # taken, not stored: the lease runs out, it is offered again
            doc = json.loads(taken)
            name = store / (base64.urlsafe_b64encode(doc["header"]["messageId"].encode()).decode() + ".msg")
            if name.exists():  # offered again after a crash between storing and DELETE: acknowledge only
                with open(seen_again, "a") as f:
                    f.write(doc["header"]["messageId"] + "\n")
            else:
                payload = base64.b64decode(doc["payloads"][0]["data"])
                _write_atomically(
                    name, json.dumps({"messageId": doc["header"]["messageId"], "payload": payload.decode()}).encode()
                )
            _maybe_die(rng, crash / 3)  # stored, not acknowledged
            status, answer = _call("DELETE", f"{api}/inbox/{item['id']}")
            if status not in (200, 409):  # 409: the lease ran out and another take got it (that one settles it)
                print(
                    f"receiver: DELETE {item['id']}: HTTP {status}: {answer.decode(errors='replace')}", file=sys.stderr
                )
                return 1
            _maybe_die(rng, crash / 3)


# -- the driver


@dataclass
class AppReport:
    """What an end-to-end run did and found."""

    count: int
    seconds: float
    sender_starts: int
    receiver_starts: int
    submitted: int
    received: int
    offered_again: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        rate = self.count / self.seconds if self.seconds else 0.0
        verdict = "exactly once" if self.ok else "PROBLEMS: " + "; ".join(self.problems)
        return (
            f"{self.count} messages in {self.seconds:.1f} s ({rate:.1f}/s): sending application started "
            f"{self.sender_starts} times, receiving application {self.receiver_starts} times; A committed "
            f"{self.submitted}, the receiving application holds {self.received} (offered again after a crash "
            f"before the DELETE: {self.offered_again}): {verdict}"
        )


def _app(role: str, api: str, folder: Path, count: int, crash: float, seed: int, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "msh.faults.app_e2e", role, api, str(folder), str(count), str(crash), str(seed)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        out.close()


def run_app_e2e(work: Path, *, count: int, crash: float = 0.05, seed: int = 1, timeout: float = 600.0) -> AppReport:
    """Run the scenario of the module docs in ``work``; the report (its ``problems`` empty when exactly once)."""
    from msh.faults.pair import free_port, make_pair

    pair = make_pair(work, proxy=False, retry_interval="PT2S", first_resend="PT2S", http_timeout="PT1.5S")
    ports = {"A": free_port(), "B": free_port()}
    for partner in (pair.a, pair.b):
        partner.env.update(
            {
                "MSH_API_ENABLED": "true",
                "MSH_API_PORT": str(ports[partner.name]),
                "MSH_API_APPLICATIONS": "app=env:E2E_APP_TOKEN",
                "MSH_API_LEASE": "PT3S",
                "E2E_APP_TOKEN": TOKEN,
            }
        )
        partner.start()
    api_a, api_b = (f"http://127.0.0.1:{ports[n]}/api" for n in ("A", "B"))
    started = time.monotonic()
    deadline = started + timeout
    starts = {"sender": 0, "receiver": 0}
    folders = {"sender": work / "sender-journal", "receiver": work / "receiver-store"}
    apis = {"sender": api_a, "receiver": api_b}
    running: dict[str, subprocess.Popen[bytes] | None] = {"sender": None, "receiver": None}
    finished: set[str] = set()
    problems: list[str] = []
    try:
        while len(finished) < 2 and time.monotonic() < deadline and not problems:
            for role in ("sender", "receiver"):
                proc = running[role]
                if role in finished:
                    continue
                if proc is None or proc.poll() is not None:
                    if proc is not None and proc.returncode == 0:
                        finished.add(role)
                        continue
                    if proc is not None and proc.returncode != CRASH:
                        problems.append(
                            f"the {role} application failed (exit {proc.returncode}): see {work}/{role}.log"
                        )
                        continue
                    starts[role] += 1
                    running[role] = _app(
                        role, apis[role], folders[role], count, crash, seed + starts[role], work / f"{role}.log"
                    )
            time.sleep(0.05)
        if len(finished) < 2 and not problems:
            problems.append(f"not finished within {timeout:g} s ({sorted(finished) or 'neither'} finished)")
    finally:
        for proc in running.values():
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        seconds = time.monotonic() - started
        pair.stop()
    return _check(work, pair.a.store, pair.b.store, folders, count, seconds, starts, problems)


def _check(
    work: Path,
    store_a: Path,
    store_b: Path,
    folders: dict[str, Path],
    count: int,
    seconds: float,
    starts: dict[str, int],
    problems: list[str],
) -> AppReport:
    with sqlite3.connect(store_a) as db:
        submitted = db.execute("SELECT count(*) FROM outbound_messages WHERE kind = 'own'").fetchone()[0]
    with sqlite3.connect(store_b) as db:
        states = dict(db.execute("SELECT state, count(*) FROM inbox GROUP BY state").fetchall())
    stored = [json.loads(p.read_bytes()) for p in folders["receiver"].glob("*.msg")]
    numbers = sorted(int(s["payload"].split("'")[1]) for s in stored)
    again_log = folders["receiver"] / "seen-again.log"
    again = len(again_log.read_text().splitlines()) if again_log.exists() else 0
    if submitted != count:
        problems.append(f"A committed {submitted} messages for {count} submitted")
    if numbers != list(range(count)):
        missing = sorted(set(range(count)) - set(numbers))[:10]
        twice = sorted({n for n in numbers if numbers.count(n) > 1})[:10]
        problems.append(f"the receiving application holds {len(numbers)} messages (missing {missing}, twice {twice})")
    if states.get("acknowledged-by-app", 0) != count or len(states) != 1:
        problems.append(f"B's inbox is {states}, not {count} acknowledged")
    return AppReport(count, seconds, starts["sender"], starts["receiver"], submitted, len(stored), again, problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msh.faults.app_e2e", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    run = sub.add_parser("run", help="run the whole scenario and print the figures")
    run.add_argument("--count", type=int, default=1000)
    run.add_argument("--crash", type=float, default=0.05, help="chance of a crash at each crash point")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--work", type=Path, default=None, help="work folder (default: a new temporary one)")
    run.add_argument("--timeout", type=float, default=1800.0)
    for role in ("sender", "receiver"):
        p = sub.add_parser(role)
        for name in ("api", "folder", "count", "crash", "seed"):
            p.add_argument(name)
    args = parser.parse_args(argv)
    if args.role == "run":
        import tempfile

        work = args.work or Path(tempfile.mkdtemp(prefix="msh-app-e2e-"))
        report = run_app_e2e(work, count=args.count, crash=args.crash, seed=args.seed, timeout=args.timeout)
        print(report.summary())
        return 0 if report.ok else 1
    run_role = sender if args.role == "sender" else receiver
    return run_role(args.api, Path(args.folder), int(args.count), float(args.crash), int(args.seed))


if __name__ == "__main__":
    raise SystemExit(main())
