"""The two-partner demo (``msh demo``): reliable messaging between two MSH processes over a lossy network.

Partner A and partner B of ``samples/cpas/demo-a-b.xml`` each run ``msh serve`` in a process of their own
with their own SQLite file (settings ``samples/config/party-a.toml`` / ``party-b.toml``), over HTTPS with
mutual TLS, on three free ports of 127.0.0.1 (or the ones ``--ports A,B,PROXY`` names): A's endpoint, B's,
and a lossy proxy's in front of B, the port the demo's copy of the agreement gives as B's endpoint, so that
A reaches B through it. During the lossy stretch the proxy loses some requests (B never sees them) and
some responses (B stored
the message but A never gets the acknowledgment). The demo submits messages with payloads to A's store
(A's server picks them up, as it would from ``msh send``), waits until every one is final, and prints what
each side saw, read back from each side's store journal. It ends with the check that matters: every
message delivered to B's application exactly once, with its payload intact, and acknowledged at A.

The agreement has both parties sign (rsa-sha256, sha256: ebMS2 §4.1.3). The demo makes a fresh signing
key pair for each partner in its work folder (:func:`signing_agreement`: the published demo keys keep
serving TLS only) and runs both on a copy of the agreement that names those certificates; its output
counts, from each side's journal, the messages A signed and the signatures B verified before delivering.
"""

from __future__ import annotations

import errno
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from msh.errors import ConfigurationError
from msh.faults.outcome import inbox_census, journal, submit_orders, wait_final
from msh.faults.pair import Partner, free_port, substitute
from msh.faults.proxy import ProxyStats
from msh.faults.workfolder import in_work_folder
from msh.store.events import EventKind

if TYPE_CHECKING:
    from msh.engine import OutboundStatus

__all__ = ["DemoPorts", "check_ports_free", "choose_ports", "run_exchange_demo", "security_counts"]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "samples" / "config"
CPA = ROOT / "samples" / "cpas" / "demo-a-b.xml"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
SAMPLE_A_URL = "https://127.0.0.1:8081/msh"  # A's endpoint in the sample agreement (and party-a.toml's port)
SAMPLE_B_URL = "https://127.0.0.1:8082/msh"  # B's: the demo's copy names the proxy's port instead
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"


@dataclass(frozen=True, slots=True)
class DemoPorts:
    """The demo's ports on 127.0.0.1: A's endpoint, B's, and the lossy proxy's in front of B."""

    a: int
    b: int
    proxy: int


def choose_ports(wanted: tuple[int, int, int] | None = None) -> DemoPorts:
    """``wanted`` (A, B, PROXY) once checked free (:func:`check_ports_free`), else three free ports."""
    if wanted is not None:
        if len(set(wanted)) != 3:
            raise ConfigurationError(f"--ports {','.join(map(str, wanted))}: give three different ports (A,B,PROXY)")
        check_ports_free(wanted)
        return DemoPorts(*wanted)
    chosen: list[int] = []
    while len(chosen) < 3:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return DemoPorts(*chosen)


def check_ports_free(ports: tuple[int, ...]) -> None:
    """:class:`ConfigurationError` (one line) naming each of ``ports`` that something else listens on."""
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
            f"(ss -ltnp shows it), choose other ports with --ports A,B,PROXY, or leave --ports out for free ones"
        )


def run_exchange_demo(
    messages: int = 100,
    loss: float = 0.15,
    lossy_share: float = 0.6,
    seed: int = 7,
    keep: bool = False,
    analytics: bool = True,
    ports: tuple[int, int, int] | None = None,
) -> int:
    """Run the demo; return 0 when every message was delivered exactly once (see the module docs).

    With ``analytics``, both journals are then exported and the delivery report is run on them
    (:mod:`msh.demos.analytics`, skipped with a note where Spark cannot run); the report stays in a folder of
    its own. The work folder (stores, logs) is removed after a successful run unless ``keep``; after a
    failed one it is kept and named, for the logs. ``ports``: A's, B's and the proxy's (default: free
    ones); :class:`ConfigurationError` when one of them is in use."""
    chosen = choose_ports(ports)
    return in_work_folder(
        "msh-demo-",
        lambda work: _run_and_report(work, messages, loss, lossy_share, seed, analytics, chosen),
        keep=keep,
        contents="stores party-a.sqlite, party-b.sqlite; logs a.log, b.log",
    )


def _run_and_report(
    work: Path, messages: int, loss: float, lossy_share: float, seed: int, analytics: bool, ports: DemoPorts
) -> int:
    status = _run(work, messages, loss, lossy_share, seed, ports)
    if analytics:
        _analytics(work)
    return status


def _tp(name: str) -> str:
    return f"{{{TP}}}{name}"


def signing_agreement(
    work: Path, cpa: Path = CPA, endpoints: dict[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Make a signing key pair for A and B in ``work`` and write ``work/agreement.xml``: ``cpa`` with each
    party's SigningCertificateRef naming its new certificate (added to its PartyInfo) and each party's trust
    anchors accepting the other's, and each endpoint URL of ``endpoints`` (sample URL: demo URL) replaced.
    Returns, per partner (``A``, ``B``), the environment variables that point its settings at the copy and
    the keys (MSH_<SECTION>_<KEY>)."""
    from lxml import etree

    from msh.security import certificate_element, generate_key_pair, write_key_pair

    text = cpa.read_text(encoding="utf-8")
    if endpoints:
        text = substitute(text, endpoints, cpa)
    root = etree.fromstring(text.encode("utf-8"))
    keys: dict[str, tuple[Path, Path]] = {}
    for name, other in (("A", "B"), ("B", "A")):
        pair = generate_key_pair(f"Party {name} (signing, pymsh demo)")
        keys[name] = write_key_pair(pair, work / "keys", f"party-{name.lower()}-signing")
        cert_id = f"{name}_SigningCert"
        info = next(
            i
            for i in root.iterfind(_tp("PartyInfo"))
            if any(c.get(_tp("certId")) == f"{name}_Cert" for c in i.iterfind(_tp("Certificate")))
        )
        info.findall(_tp("Certificate"))[-1].addnext(etree.fromstring(certificate_element(pair.certificate, cert_id)))
        for ref in info.iter(_tp("SigningCertificateRef")):
            ref.set(_tp("certId"), cert_id)
        # The other party's trust anchors (its SigningSecurityDetailsRef) accept this certificate.
        for details in root.iter(_tp("SecurityDetails")):
            anchors = details.find(_tp("TrustAnchors"))
            if details.get(_tp("securityId")) == f"{other}_TrustedPeers" and anchors is not None:
                etree.SubElement(anchors, _tp("AnchorCertificateRef")).set(_tp("certId"), cert_id)
    agreement = work / "agreement.xml"
    agreement.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    return {
        name: {
            "MSH_AGREEMENTS_PATHS": str(agreement),
            "MSH_SECURITY_SIGNING_KEY": str(key),
            "MSH_SECURITY_SIGNING_CERTIFICATE": str(cert),
            "MSH_SECURITY_DECRYPTION_KEY": str(key),
        }
        for name, (key, cert) in keys.items()
    }


def security_counts(store: Path) -> Counter[str]:
    """From a store's journal: messages submitted signed, and received messages whose signature was verified."""
    return Counter(
        f"{e.kind}-signed"
        for e in journal(store)
        if e.kind in (EventKind.SUBMITTED, EventKind.RECEIVED) and e.detail.get("signed") is True
    )


def _analytics(work: Path) -> None:
    """Export both partners' journals and run the delivery report on them (kept in its own folder)."""
    from msh.demos.analytics import report_on_demo

    report_on_demo([(CONFIG / f"party-{key}.toml", work / f"party-{key}.sqlite") for key in ("a", "b")])


def _run(work: Path, messages: int, loss: float, lossy_share: float, seed: int, ports: DemoPorts) -> int:
    from msh.faults.proxy import run_in_thread
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    a_store, b_store = work / "party-a.sqlite", work / "party-b.sqlite"
    print(f"ebXML MSH demo: {messages} reliable messages from partner A to partner B (work folder {work})")
    print("  agreement samples/cpas/demo-a-b.xml: AckRequested, DuplicateElimination, sync acknowledgments,")
    print("  HTTPS with mutual TLS, messages and signals signed (rsa-sha256); A waits 3 s for an acknowledgment,")
    print("  then resends every RetryInterval (5 s)")
    print(f"  ports on 127.0.0.1: A {ports.a}, B {ports.b}, the lossy proxy in front of B {ports.proxy}")
    endpoints = {SAMPLE_A_URL: f"https://127.0.0.1:{ports.a}/msh", SAMPLE_B_URL: f"https://127.0.0.1:{ports.proxy}/msh"}
    signing = signing_agreement(work, endpoints=endpoints)
    print(f"  signing key pairs made for A and B in {work / 'keys'}; the agreement names their certificates")
    b = Partner(
        "B",
        CONFIG / "party-b.toml",
        b_store,
        ports.b,
        work / "b.log",
        env={"MSH_STORE_URL": str(b_store), "MSH_SERVER_PORT": str(ports.b), **signing["B"]},
    )
    a_env = {"MSH_STORE_URL": str(a_store), "MSH_SERVER_PORT": str(ports.a), **signing["A"]}
    a = Partner("A", CONFIG / "party-a.toml", a_store, ports.a, work / "a.log", env=a_env)
    partners = (b, a)
    try:
        for partner in partners:
            partner.start()
        with run_in_thread(
            ("127.0.0.1", ports.proxy),
            ("127.0.0.1", ports.b),
            drop_requests=loss,
            drop_responses=loss,
            seed=seed,
        ) as proxy:
            print(f"  both partners up; lossy stretch: {loss:.0%} of requests and {loss:.0%} of responses lost")
            settings = load_settings(CONFIG / "party-a.toml", env=a_env)
            sender = Msh(settings)
            started = time.monotonic()
            lossy_count = int(messages * lossy_share)

            def before(i: int) -> None:
                if i == lossy_count:
                    proxy.set_loss(0.0, 0.0)
                    print(f"  {i} messages submitted in the lossy stretch; the network is clean from here on")

            try:
                sent = submit_orders(sender, PARTY_B, range(messages), before=before)
                final = wait_final(sender, sent, timeout=120)
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
    from msh.engine import OutboundStatus

    a, b = Counter(e.kind for e in journal(a_store)), Counter(e.kind for e in journal(b_store))
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
    signed_a, verified_b = security_counts(a_store), security_counts(b_store)
    print(
        f"message security:     {signed_a['submitted-signed']} of {a['submitted']} messages signed by A (rsa-sha256), "
        f"{verified_b['received-signed']} of {b['received']} received by B verified against A's certificate in the "
        "agreement before delivery (unsigned or altered ones are refused with SecurityFailure)"
    )
    delivered_ok = sum(1 for v in final.values() if v is OutboundStatus.DELIVERED)
    census = inbox_census(b_store, sent)
    print(
        f"\nresult after {elapsed:.1f} s: {delivered_ok}/{messages} acknowledged at A; {census.once}/{messages} in "
        f"B's inbox exactly once, {census.intact} with the payload byte for byte; {census.extra} extra deliveries"
    )
    ok = delivered_ok == messages and census.once == messages and census.intact == messages and census.extra == 0
    ok = ok and signed_a["submitted-signed"] == messages and verified_b["received-signed"] == b["received"]
    print(
        "every message signed, verified and delivered exactly once"
        if ok
        else "FAILED: not every message was signed, verified and delivered exactly once"
    )
    return 0 if ok else 1
