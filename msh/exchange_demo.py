"""The two-partner demo (``msh demo``): reliable messaging between two MSH processes over a lossy network.

Partner A and partner B of ``samples/cpas/demo-a-b.xml`` each run ``msh serve`` in a process of their own
with their own SQLite file (settings ``samples/config/party-a.toml`` / ``party-b.toml``), over HTTPS with
mutual TLS. A lossy proxy sits where the agreement says B listens (127.0.0.1:8082; B itself listens on
18082): during the lossy stretch it loses some requests (B never sees them) and some responses (B stored
the message but A never gets the acknowledgment). The demo submits messages with payloads to A's store
(A's server picks them up, as it would from ``msh send``), waits until every one is final, and prints what
each side saw, read back from each side's store journal. It ends with the check that matters: every
message delivered to B's application exactly once, with its payload intact, and acknowledged at A.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import socket
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from msh.errors import ConfigurationError
from msh.faults.pair import Partner
from msh.faults.proxy import ProxyStats

if TYPE_CHECKING:
    from msh.engine import OutboundStatus

__all__ = ["run_exchange_demo"]

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "samples" / "config"
A_PORT = 8081  # where samples/config/party-a.toml and the agreement have A listen
B_PORT_BEHIND_PROXY = 18082
B_PORT = 8082  # where the agreement has B listen: the lossy proxy takes it
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"


def _payload(i: int) -> bytes:
    line = f"<line n='{i}'><item>demo item</item><quantity>{i % 7 + 1}</quantity></line>"
    body = line * (2048 // len(line))
    return f"<?xml version='1.0'?><order id='{i}'>{body}</order>".encode()


def _journal(store_url: str) -> Counter[str]:
    from msh.store import open_store

    counts: Counter[str] = Counter()
    with open_store(store_url, migrate=False) as store:
        after = 0
        while True:
            with store.transaction(readonly=True) as tx:
                events = tx.list_events(after, limit=5000)
            if not events:
                return counts
            counts.update(e.kind for e in events)
            after = events[-1].id


def check_ports_free(ports: tuple[int, ...] | None = None) -> None:
    """:class:`ConfigurationError` (one line) naming each demo port (default: the three the demo uses) that
    something else listens on."""
    if ports is None:
        ports = (A_PORT, B_PORT, B_PORT_BEHIND_PROXY)
    busy = []
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                busy.append(str(port))
    if busy:
        raise ConfigurationError(
            f"the demo needs ports {', '.join(map(str, ports))} on 127.0.0.1, and {', '.join(busy)} "
            f"{'is' if len(busy) == 1 else 'are'} in use (another demo or msh serve?); stop what listens there "
            f"(ss -ltnp shows it) and run the demo again"
        )


def run_exchange_demo(
    messages: int = 100,
    loss: float = 0.15,
    lossy_share: float = 0.6,
    seed: int = 7,
    keep: bool = False,
    analytics: bool = True,
) -> int:
    """Run the demo; return 0 when every message was delivered exactly once (see the module docs).

    With ``analytics``, both journals are then exported and the delivery report is run on them
    (:mod:`msh.demo_analytics`, skipped with a note where Spark cannot run); the report stays in a folder of
    its own. The work folder (stores, logs) is removed after a successful run unless ``keep``; after a
    failed one it is kept and named, for the logs. :class:`ConfigurationError` when a port it needs is in
    use."""
    check_ports_free()
    work = Path(tempfile.mkdtemp(prefix="msh-demo-"))
    status = 1
    try:
        status = _run(work, messages, loss, lossy_share, seed)
        if analytics:
            _analytics(work)
        return status
    finally:
        if status == 0 and not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work folder kept: {work} (stores party-a.sqlite, party-b.sqlite; logs a.log, b.log)")


def _analytics(work: Path) -> None:
    """Export both partners' journals and run the delivery report on them (kept in its own folder)."""
    from msh.demo_analytics import export_and_report
    from msh.engine.signals import party_text
    from msh.runtime.config import load_settings
    from msh.store import open_store

    out = Path(tempfile.mkdtemp(prefix="msh-demo-report-"))
    stores = []
    try:
        for key in ("a", "b"):
            identity = load_settings(CONFIG / f"party-{key}.toml").identity
            store = open_store(str(work / f"party-{key}.sqlite"), migrate=False)
            stores.append((party_text(identity.party_id, identity.party_id_type), store))
        export_and_report(stores, out)
    finally:
        for _party, store in stores:
            store.close()


def _run(work: Path, messages: int, loss: float, lossy_share: float, seed: int) -> int:
    from msh.faults.proxy import run_in_thread
    from msh.runtime.compose import Payload, Submission
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    a_store, b_store = work / "party-a.sqlite", work / "party-b.sqlite"
    print(f"ebXML MSH demo: {messages} reliable messages from partner A to partner B (work folder {work})")
    print("  agreement samples/cpas/demo-a-b.xml: AckRequested, DuplicateElimination, sync acknowledgments,")
    print("  HTTPS with mutual TLS; A waits 3 s for an acknowledgment, then resends every RetryInterval (5 s)")
    b = Partner(
        "B",
        CONFIG / "party-b.toml",
        b_store,
        B_PORT_BEHIND_PROXY,
        work / "b.log",
        env={"MSH_STORE_URL": str(b_store), "MSH_SERVER_PORT": str(B_PORT_BEHIND_PROXY)},
    )
    a = Partner("A", CONFIG / "party-a.toml", a_store, A_PORT, work / "a.log", env={"MSH_STORE_URL": str(a_store)})
    partners = (b, a)
    try:
        for partner in partners:
            partner.start()
        with run_in_thread(
            ("127.0.0.1", B_PORT),
            ("127.0.0.1", B_PORT_BEHIND_PROXY),
            drop_requests=loss,
            drop_responses=loss,
            seed=seed,
        ) as proxy:
            print(f"  both partners up; lossy stretch: {loss:.0%} of requests and {loss:.0%} of responses lost")
            settings = load_settings(CONFIG / "party-a.toml", env={"MSH_STORE_URL": str(a_store)})
            sender = Msh(settings)
            sent: dict[str, str] = {}
            started = time.monotonic()
            lossy_count = int(messages * lossy_share)
            try:
                for i in range(messages):
                    if i == lossy_count:
                        proxy.set_loss(0.0, 0.0)
                        print(f"  {i} messages submitted in the lossy stretch; the network is clean from here on")
                    body = _payload(i)
                    submission = Submission(PARTY_B, SERVICE, ACTION, (Payload(body, "application/xml"),))
                    sent[sender.submit(submission)] = hashlib.sha256(body).hexdigest()
                    time.sleep(0.02)
                deadline = time.monotonic() + 120
                final: dict[str, OutboundStatus] = {}
                while time.monotonic() < deadline and len(final) < len(sent):
                    for message_id in sent:
                        if message_id not in final:
                            stored = sender.status(message_id)
                            if stored is not None and stored.state.status.final:
                                final[message_id] = stored.state.status
                    time.sleep(0.25)
            finally:
                sender.close()
            elapsed = time.monotonic() - started
            stats = proxy.stats()
        for partner in partners:
            partner.stop()
        return _report(messages, sent, final, elapsed, stats, a_store, b_store)
    finally:
        for partner in partners:
            partner.kill()


def _report(
    messages: int,
    sent: dict[str, str],
    final: dict[str, OutboundStatus],
    elapsed: float,
    stats: ProxyStats,
    a_store: Path,
    b_store: Path,
) -> int:
    from msh.ebms.message import ParseMode, parse_message
    from msh.engine import OutboundStatus
    from msh.store import open_store

    a, b = _journal(str(a_store)), _journal(str(b_store))
    # The proxy counts flights, not HTTP exchanges: each TLS handshake flight is a "request" or "response" too.
    print(
        f"\nnetwork: the proxy lost {stats.requests_dropped} of {stats.requests_dropped + stats.requests_forwarded} "
        f"flights from A and {stats.responses_dropped} of {stats.responses_dropped + stats.responses_forwarded} "
        f"from B (HTTP requests and responses, and TLS handshake flights)"
    )
    print(
        f"partner A (sender):   {a['submitted']} submitted, {a['transmission']} transmissions ({a['resent']} of "
        f"them resends), {a['delivered']} acknowledged, {a['failed']} failed"
    )
    print(
        f"partner B (receiver): {b['received']} received and delivered to the inbox, {b['duplicate']} duplicates "
        f"eliminated (each answered with the stored acknowledgment), {b['rejected']} refused"
    )
    delivered_ok = sum(1 for v in final.values() if v is OutboundStatus.DELIVERED)
    seen: Counter[str] = Counter()
    intact = 0
    with open_store(str(b_store), migrate=False) as store, store.transaction(readonly=True) as tx:
        entries = tx.inbox_list(None, limit=max(10, messages * 3))
        for entry in entries:
            seen[entry.message_id] += 1
            record = tx.get_inbound(entry.id)
            if record is None or entry.message_id not in sent:
                continue
            with tx.open_blob(record.body_blob_id) as blob:
                message = parse_message(blob, record.content_type, mode=ParseMode.LENIENT)
            try:
                digest = hashlib.sha256(message.payloads[0].body.read_bytes()).hexdigest() if message.payloads else ""
            finally:
                message.close()
            intact += digest == sent[entry.message_id]
    once = sum(1 for m in sent if seen[m] == 1)
    extra = sum(c - 1 for c in seen.values() if c > 1) + sum(1 for m in seen if m not in sent)
    print(
        f"\nresult after {elapsed:.1f} s: {delivered_ok}/{messages} acknowledged at A; {once}/{messages} in B's inbox "
        f"exactly once, {intact} with the payload byte for byte; {extra} extra deliveries"
    )
    ok = delivered_ok == messages and once == messages and intact == messages and extra == 0
    print("every message delivered exactly once" if ok else "FAILED: not every message was delivered exactly once")
    return 0 if ok else 1
