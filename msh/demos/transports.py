"""The two-partner demo over SMTP or AMQP (``msh demo --transport smtp|amqp``, docs/transports).

Partners A and B of the demo agreement run ``msh serve`` each, as in the HTTP demo, but the agreement's
endpoints are moved to the binding (:mod:`msh.faults.transport_pair`):

* ``smtp`` (ebMS2 Appendix B.3): ``mailto:`` endpoints; each partner runs its own SMTP listener and sends
  through the other's as its relay. Nothing outside the two processes is needed.
* ``amqp``: each partner's endpoint is an address on an AMQP 1.0 broker (default RabbitMQ on
  127.0.0.1:5672 with its AMQP 1.0 plugin), which it consumes. The demo checks that a broker answers and,
  when none does, says what is missing and how to start it.

Messages are signed (rsa-sha256) and ask for an acknowledgment, which comes back over the same binding
(asynchronously: ebMS2 B.3.3). Halfway through, B is killed (SIGKILL) and restarted: what was in flight
comes again from the source (relay retry or broker redelivery) or from A's resends, and B's duplicate
elimination keeps each delivery single. The verdict: every message acknowledged at A and in B's inbox once.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from msh.errors import ConfigurationError
from msh.faults.outcome import inbox_census, journal, submit_orders, wait_final
from msh.faults.pair import PARTY_B
from msh.faults.transport_pair import TransportKind, make_transport_pair

__all__ = ["broker_problem", "run_transport_demo"]


def broker_problem(url: str, timeout: float = 2.0) -> str | None:
    """Why no AMQP 1.0 broker can be used at ``url`` (None: something accepts AMQP connections there)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or (5671 if parts.scheme == "amqps" else 5672)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            # AMQP 1.0 §2.2: the protocol header; a broker without AMQP 1.0 answers with another version.
            sock.sendall(b"AMQP\x00\x01\x00\x00")
            answer = sock.recv(8)
    except OSError as exc:
        return (
            f"no broker answers at {host}:{port} ({exc.strerror or exc}); start one, e.g. RabbitMQ "
            "(`rabbitmq-server -detached`, then `rabbitmq-plugins enable rabbitmq_amqp1_0`), or give --amqp-url"
        )
    if not answer.startswith(b"AMQP") or answer[4:5] not in (b"\x00", b"\x03"):
        return (
            f"the broker at {host}:{port} does not speak AMQP 1.0 (it answered {answer!r}); for RabbitMQ enable "
            "its plugin: `rabbitmq-plugins enable rabbitmq_amqp1_0`"
        )
    return None


def run_transport_demo(
    transport: TransportKind, *, messages: int = 50, keep: bool = False, amqp_url: str = "amqp://127.0.0.1:5672"
) -> int:
    """Run the demo (see the module docs); exit status 0 when every message was delivered exactly once."""
    if transport == "amqp":
        problem = broker_problem(amqp_url)
        if problem is not None:
            raise ConfigurationError(f"msh demo --transport amqp: {problem}")
    work = Path(tempfile.mkdtemp(prefix=f"msh-demo-{transport}-"))
    status = 1
    try:
        status = _run(work, transport, messages, amqp_url)
        return status
    finally:
        if keep or status != 0:
            print(f"work folder kept: {work}")
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


def _run(work: Path, transport: TransportKind, messages: int, amqp_url: str) -> int:
    from msh.demos.exchange import security_counts
    from msh.engine import OutboundStatus
    from msh.runtime.config import load_settings
    from msh.runtime.msh import Msh

    tp = make_transport_pair(work, transport, amqp_url=amqp_url)
    a, b = tp.pair.a, tp.pair.b
    print(f"ebXML MSH demo over {transport.upper()}: {messages} reliable, signed messages from A to B (work {work})")
    print(f"  A's endpoint {tp.a_url}, B's endpoint {tp.b_url}")
    if tp.smtpd_ports is not None:
        print(
            f"  each partner runs an SMTP listener (A on 127.0.0.1:{tp.smtpd_ports[0]}, B on "
            f"127.0.0.1:{tp.smtpd_ports[1]}) and sends through the other's as its relay"
        )
    else:
        print(f"  both partners consume their own address on the broker at {amqp_url}")
    print("  acknowledgments come back over the same binding (asynchronously, ebMS2 B.3.3)")
    partners = (b, a)
    try:
        for partner in partners:
            partner.start()
        sender = Msh(load_settings(a.config, env={}))
        started = time.monotonic()
        try:
            half = messages // 2

            def before(i: int) -> None:
                if i == half and i:
                    b.kill()
                    print(f"  {i} submitted; B killed (SIGKILL) and restarted")
                    b.start()

            sent = submit_orders(sender, PARTY_B, range(messages), before=before, pace=0.05)
            final = wait_final(sender, sent, timeout=240)
        finally:
            sender.close()
        elapsed = time.monotonic() - started
        for partner in partners:
            partner.stop()
        a_kinds, b_kinds = Counter(e.kind for e in journal(a.store)), Counter(e.kind for e in journal(b.store))
        print(
            f"partner A (sender):   {a_kinds['submitted']} submitted, {a_kinds['transmission']} transmissions "
            f"({a_kinds['resent']} of them resends), {a_kinds['delivered']} acknowledged, {a_kinds['failed']} failed"
        )
        print(
            f"partner B (receiver): {b_kinds['received']} received and delivered to the inbox, "
            f"{b_kinds['duplicate']} duplicates eliminated, {b_kinds['rejected']} refused"
        )
        signed_a, verified_b = security_counts(a.store), security_counts(b.store)
        print(
            f"message security:     {signed_a['submitted-signed']} of {a_kinds['submitted']} messages signed by A "
            f"(rsa-sha256), {verified_b['received-signed']} of {b_kinds['received']} verified by B before delivery"
        )
        acknowledged = sum(1 for v in final.values() if v is OutboundStatus.DELIVERED)
        census = inbox_census(b.store, sent)
        print(
            f"\nresult after {elapsed:.1f} s: {acknowledged}/{messages} acknowledged at A; {census.once}/{messages} "
            f"in B's inbox exactly once, {census.intact} with the payload byte for byte; {census.extra} extra"
        )
        ok = acknowledged == messages and census.once == messages and census.intact == messages and census.extra == 0
        ok = ok and signed_a["submitted-signed"] == messages and verified_b["received-signed"] == b_kinds["received"]
        print(
            f"every message signed, verified and delivered exactly once over {transport.upper()}"
            if ok
            else "FAILED: not every message was signed, verified and delivered exactly once"
        )
        return 0 if ok else 1
    finally:
        for partner in partners:
            partner.kill()
