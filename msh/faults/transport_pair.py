"""Two real MSH processes that exchange messages over SMTP or over an AMQP 1.0 broker (docs/transports).

:func:`make_transport_pair` writes what :func:`msh.faults.pair.make_pair` writes (the demo agreement with
free ports, a settings file per partner) and then moves the agreement's two TransportReceivers to the
binding asked for:

* ``smtp``: each party's endpoint becomes ``mailto:msh-a@party-a.test`` / ``mailto:msh-b@party-b.test``
  (TransportProtocol SMTP, ebMS2 Appendix B.3) and each process runs its own SMTP listener (``[smtpd]``);
  each sends through the other's listener as its relay (``[smtp]``). With ``mailbox``, B reads its mail
  from an IMAP mailbox instead (``[mailbox]``, a private Dovecot started by the caller) into which a
  mail drop (:class:`msh.faults.maildrop.MailDrop`) delivers what A sends;
* ``amqp``: each party's endpoint becomes an address of its own on the broker (TransportProtocol AMQP),
  which its process consumes (``[amqp]``).

Replies on the connection are impossible over both (ebMS2 B.3.3: every response is asynchronous), so every
channel's syncReplyMode becomes none and acknowledgments come back as messages of their own. The TLS of the
HTTP transport (TransportClientSecurity/TransportServerSecurity) is dropped from the agreement; the
messages stay signed (ebMS2 §4.1).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lxml import etree

from msh.errors import ConfigurationError
from msh.faults.pair import Pair, free_port, make_pair
from msh.safexml import parse_xml

__all__ = ["TransportKind", "TransportPair", "make_transport_pair", "move_endpoints"]

TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
TransportKind = Literal["smtp", "amqp"]
MAIL_A, MAIL_B = "msh-a@party-a.test", "msh-b@party-b.test"


def _tp(name: str) -> str:
    return f"{{{TP}}}{name}"


@dataclass(frozen=True, slots=True)
class TransportPair:
    """A :class:`~msh.faults.pair.Pair` moved to another binding: each party's endpoint URL, and for
    ``smtp`` each party's listener port and (``mailbox``) the mail drop's port."""

    pair: Pair
    transport: TransportKind
    a_url: str
    b_url: str
    smtpd_ports: tuple[int, int] | None = None
    maildrop_port: int | None = None


def move_endpoints(cpa: Path, urls: dict[str, str], protocol: str, *, senders: bool = True) -> None:
    """Rewrite the agreement at ``cpa``: each TransportReceiver Endpoint whose URI is a key of ``urls`` gets
    the value, and its TransportReceiver the TransportProtocol ``protocol`` without the TLS of HTTP; with
    ``senders`` the TransportSender of the same Transport too (the party sends that way as well). Every
    channel's syncReplyMode becomes none."""
    root = parse_xml(cpa.read_bytes())
    moved = 0
    for transport in root.iter(_tp("Transport")):
        receiver = transport.find(_tp("TransportReceiver"))
        if receiver is None:
            continue
        endpoints = [e for e in receiver.findall(_tp("Endpoint")) if e.get(_tp("uri"), "") in urls]
        if not endpoints:
            continue
        for endpoint in endpoints:
            endpoint.set(_tp("uri"), urls[endpoint.get(_tp("uri"), "")])
            moved += 1
        sender = transport.find(_tp("TransportSender"))
        for element in (receiver, sender if senders else None):
            if element is None:
                continue
            for proto in element.findall(_tp("TransportProtocol")):
                proto.text = protocol
                if _tp("version") in proto.attrib:
                    del proto.attrib[_tp("version")]
            for name in ("TransportClientSecurity", "TransportServerSecurity"):
                for security in element.findall(_tp(name)):
                    element.remove(security)
    if moved != len(urls):
        raise ConfigurationError(f"{cpa}: {moved} of {len(urls)} endpoints found to move; update {__name__}")
    for characteristics in root.iter(_tp("MessagingCharacteristics")):
        # ebMS2 B.3.3: responses are never on the connection over these bindings.
        characteristics.set(_tp("syncReplyMode"), "none")
    cpa.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))


def _append(config: Path, lines: list[str]) -> None:
    with config.open("a", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


def make_transport_pair(
    work: Path,
    transport: TransportKind,
    *,
    amqp_url: str = "amqp://127.0.0.1:5672",
    amqp_user: str = "guest",
    amqp_password: str = "guest",
    mailbox: tuple[int, str, str] | None = None,
    retries: int = 100,
    retry_interval: str = "PT2S",
    first_resend: str = "PT2S",
    send_timeout: str = "PT1S",
) -> TransportPair:
    """Write the pair into ``work`` (see the module docs). ``mailbox`` (smtp only): the IMAP port, user and
    password of the mailbox B reads; A's mail then goes to a mail drop whose port is returned."""
    pair = make_pair(
        work,
        retries=retries,
        retry_interval=retry_interval,
        first_resend=first_resend,
        http_timeout=send_timeout,
        proxy=False,
    )
    old_a, old_b = f"https://127.0.0.1:{pair.a.port}/msh", f"https://127.0.0.1:{pair.b.port}/msh"
    if transport == "smtp":
        a_url, b_url = f"mailto:{MAIL_A}", f"mailto:{MAIL_B}"
        move_endpoints(pair.cpa, {old_a: a_url, old_b: b_url}, "SMTP")
        a_smtpd, b_smtpd = free_port(), free_port()
        drop = free_port() if mailbox is not None else None
        _append(
            pair.a.config,
            [
                "[smtp]",
                'host = "127.0.0.1"',
                f"port = {drop if drop is not None else b_smtpd}",
                'security = "none"',
                f'from_address = "{MAIL_A}"',
                "[smtpd]",
                "enabled = true",
                'host = "127.0.0.1"',
                f"port = {a_smtpd}",
                f"dead_letters = {str(work / 'dead-letters-a')!r}",
            ],
        )
        b_lines = [
            "[smtp]",
            'host = "127.0.0.1"',
            f"port = {a_smtpd}",
            'security = "none"',
            f'from_address = "{MAIL_B}"',
        ]
        if mailbox is None:
            b_lines += [
                "[smtpd]",
                "enabled = true",
                'host = "127.0.0.1"',
                f"port = {b_smtpd}",
                f"dead_letters = {str(work / 'dead-letters-b')!r}",
            ]
        else:
            imap_port, user, password = mailbox
            (work / "mailbox.password").write_text(password + "\n", encoding="utf-8")
            b_lines += [
                "[mailbox]",
                "enabled = true",
                'host = "127.0.0.1"',
                f"port = {imap_port}",
                'security = "none"',
                f'username = "{user}"',
                f"password = {'file:' + str(work / 'mailbox.password')!r}",
                'poll_interval = "PT1S"',
            ]
        _append(pair.b.config, b_lines)
        return TransportPair(pair, transport, a_url, b_url, (a_smtpd, b_smtpd), drop)
    run = secrets.token_hex(4)
    base = amqp_url.rstrip("/")
    a_url, b_url = f"{base}/queue/ebms-a-{run}", f"{base}/queue/ebms-b-{run}"
    move_endpoints(pair.cpa, {old_a: a_url, old_b: b_url}, "AMQP")
    secret = work / "amqp.password"
    secret.write_text(amqp_password + "\n", encoding="utf-8")
    for partner, url in ((pair.a, a_url), (pair.b, b_url)):
        _append(
            partner.config,
            [
                "[amqp]",
                "enabled = true",
                f'url = "{url}"',
                f'username = "{amqp_user}"',
                f"password = {'file:' + str(secret)!r}",
            ],
        )
    return TransportPair(pair, transport, a_url, b_url)
