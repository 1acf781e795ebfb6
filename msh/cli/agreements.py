"""``msh cpa validate | show | list``: CPP/CPA 2.0 agreement files, and the agreements an MSH is configured with.

``validate`` lists every problem of each file, one line each (``file:line: path: message``; a warning reads
``file:line: path: Warning: message``), and what it asks of message security that the MSH does not
implement (``file: agreement ..., DocExchange ...: ...``); it warns (``file: Warning: ...``) for an agreement
outside its validity window or a certificate in it that has expired or is not valid yet: exit status 0 when
every file loads and can be used (warnings or not: an expired agreement is still a well-formed one, and
``FILE: ok with N warnings`` says it), 1 when any has an error. ``show`` prints a readable summary of one
agreement (any agreement ``validate`` accepts): parties, roles, actions and the channels they use, with each
channel's reliability and security, and each certificate's subject and expiry (``--json``: the same
facts with camelCase keys, :mod:`msh.cli.agreement_certificates`). ``list`` lists the agreements of
``agreements.paths`` this party is in. ``add``, ``remove`` and ``reload`` change the agreements of a
running MSH (:mod:`msh.cli.agreement_changes`).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from msh.cli.agreement_certificates import agreement_json, certificate_lines, validity_warnings, window_state
from msh.cli.agreement_changes import add_change_commands
from msh.cli.common import Subcommands, add_command, running_msh
from msh.cli.cpa_new import add_cpa_new_command

if TYPE_CHECKING:
    from cpa.duration import XsDuration
    from cpa.model import CollaborationProtocolAgreement, DeliveryChannel, EbxmlBinding, PartyInfo, TransportSecurity

__all__ = ["add_cpa_commands", "render_agreement"]


def _validate(args: argparse.Namespace) -> int:
    from cpa import CpaError, load
    from cpa.interactions import interaction_problems
    from msh.security.agreement import agreement_security_problems

    failed = False
    for path in args.files:
        try:
            agreement = load(path)
        except CpaError as exc:
            failed = True
            for problem in exc.problems:
                print(problem)
            continue
        # ebMS2 §4.1.4.5: a digital envelope or signature protocol the MSH lacks makes the agreement unusable;
        # §9.1, §10.1.1: so does a combination of header elements the specification forbids, always asked for.
        unusable = agreement_security_problems(agreement) + interaction_problems(agreement)
        for line in unusable:
            print(f"{path}: {line}")
        if unusable:
            failed = True
        else:
            for warning in agreement.warnings:
                print(warning)
            # CPP/A 2.0 §9.4.2-§9.4.3, RFC 5280 §4.1.2.5: usable files, though not at this moment.
            validity = validity_warnings(agreement, datetime.now(UTC))
            for line in validity:
                print(f"{path}: Warning: {line}")
            count = len(agreement.warnings) + len(validity)
            noted = f" with {count} warning{'' if count == 1 else 's'}" if count else ""
            print(f"{path}: ok{noted} (cpaid {agreement.cpaid}, status {agreement.status.value})")
    return 1 if failed else 0


def _show(args: argparse.Namespace) -> int:
    from cpa import CpaError, load

    try:
        agreement = load(args.file)
    except CpaError as exc:
        for problem in exc.problems:
            print(problem)
        return 1
    now = datetime.now(UTC)
    if args.json:
        print(json.dumps(agreement_json(agreement, now), indent=2))
        return 0
    print(render_agreement(agreement, now))
    return 0


def _list(args: argparse.Namespace) -> int:
    from cpa.resolve import in_force

    with running_msh(args, keys=False) as msh:
        now = datetime.now(UTC)
        if len(msh.registry) == 0:
            print("no agreements (agreements.paths names none: this MSH only forwards along its routes)")
        for cpa in msh.registry:
            other = [p for p in cpa.party_infos if not any(pid.value == msh.party[0] for pid in p.party_ids)]
            partner = other[0].party_name if other else "?"
            state = "in force" if in_force(cpa, now) else "NOT in force"
            print(
                f"{cpa.cpaid}  {cpa.status.value:<8} {state:<12} with {partner}  "
                f"{cpa.start.date().isoformat()}..{cpa.end.date().isoformat()}  ({cpa.source})"
            )
        return 0


# ---------------------------------------------------------------------------------------- cpa show


def _duration(value: XsDuration) -> str:
    """``30 seconds``, ``1 month 2 days``: an agreement's duration the way an operator reads it."""
    return value.describe()


def _short(uri: str) -> str:
    """The name at the end of an algorithm URI (``...xmldsig-more#rsa-sha256`` -> ``rsa-sha256``)."""
    return uri.rsplit("#", 1)[-1]


def _tls(security: TransportSecurity | None) -> str:
    if security is None:
        return "no transport security"
    version = f" {security.protocol_version}" if security.protocol_version else ""
    return f"{security.protocol}{version}"


def _binding_lines(label: str, binding: EbxmlBinding | None) -> list[str]:
    if binding is None:
        return []
    rm = binding.reliable_messaging
    reliability = (
        f"retries {rm.retries}, retry interval {_duration(rm.retry_interval)}, order {rm.message_order_semantics.value}"
        if rm is not None
        else "no reliable messaging"
    )
    if binding.persist_duration is not None:
        reliability += f", persist duration {_duration(binding.persist_duration)}"
    nr = binding.non_repudiation
    if nr is None:
        signing = "not signed"
    else:
        signing = f"signed {_short(nr.signature_algorithm)} / {_short(nr.hash_function)}"
        if nr.certificate is not None:
            signing += f" with {nr.certificate.cert_id}"
        if nr.security_details is not None:
            signing += f", trusting {nr.security_details.security_id}"
    de = binding.digital_envelope
    encryption = "not encrypted" if de is None else f"encrypted {_short(de.encryption_algorithm)} ({de.protocol})"
    return [
        f"{label}: {reliability}",
        f"{' ' * len(label)}  {signing}; {encryption}",
    ]


def _channel_lines(channel: DeliveryChannel) -> list[str]:
    mc = channel.messaging_characteristics
    actor = f" ({mc.actor.rsplit(':', 1)[-1]})" if mc.actor else ""
    lines = [
        f"channel {channel.channel_id} (transport {channel.transport.transport_id}, "
        f"doc exchange {channel.doc_exchange.doc_exchange_id})",
        f"  acknowledgments {mc.ack_requested.value}{actor}, signed acks {mc.ack_signature_requested.value}, "
        f"duplicate elimination {mc.duplicate_elimination.value}, sync reply {mc.sync_reply_mode.value}",
    ]
    lines += ["  " + line for line in _binding_lines("sending", channel.doc_exchange.sender_binding)]
    lines += ["  " + line for line in _binding_lines("receiving", channel.doc_exchange.receiver_binding)]
    sender, receiver = channel.transport.sender, channel.transport.receiver
    if sender is not None:
        client = sender.client_security
        auth = (
            f", client certificate {client.certificate.cert_id}"
            if client is not None and client.certificate is not None
            else ", no client certificate"
        )
        lines.append(
            f"  sends over {sender.protocol} {sender.protocol_version or ''}".rstrip() + f" / {_tls(client)}{auth}"
        )
    if receiver is not None:
        server = receiver.server_security
        endpoints = ", ".join(f"{e.uri} ({e.type.value})" for e in receiver.endpoints)
        detail = _tls(server)
        if server is not None and server.certificate is not None:
            detail += f", server certificate {server.certificate.cert_id}"
        if server is not None and server.peer_security is not None:
            detail += f", client authentication against {server.peer_security.security_id}"
        lines.append(f"  receives at {endpoints} / {detail}")
    return lines


def _party_lines(party: PartyInfo, now: datetime) -> list[str]:
    ids = ", ".join(f"{p.value} ({p.type})" if p.type else p.value for p in party.party_ids)
    lines = [f"party {party.party_name}: {ids}"]
    for role in party.collaboration_roles:
        binding = role.service_binding
        service = f"{binding.service_type}:{binding.service}" if binding.service_type else binding.service
        version = f" {role.process_specification_version}" if role.process_specification_version else ""
        lines.append(f"  role {role.role} in {role.process_specification}{version}, service {service}")
        for verb, actions in (("sends", binding.can_send), ("receives", binding.can_receive)):
            for action in actions:
                channels = ", ".join(c.channel_id for c in action.channels)
                lines.append(f"    {verb} {action.action} via {channels}")
    lines += ["  " + line for line in certificate_lines(party, now)]
    lines.append(f"  default MSH channel: {party.default_msh_channel.channel_id}")
    for channel in party.delivery_channels:
        lines += ["  " + line for line in _channel_lines(channel)]
    return lines


def render_agreement(agreement: CollaborationProtocolAgreement, now: datetime) -> str:
    """The readable summary ``msh cpa show`` prints of ``agreement``, its validity window seen at ``now``."""
    window = window_state(agreement, now)
    version = f" (version {agreement.version})" if agreement.version else ""
    lines = [
        agreement.source,
        f"cpaid: {agreement.cpaid}{version}",
        f"status: {agreement.status.value}",
        f"valid: {agreement.start.isoformat()} to {agreement.end.isoformat()} ({window})",
        f"signed: {'yes, signature verified' if agreement.signed else 'no'}",
        *(str(warning) for warning in agreement.warnings),
        *(f"Warning: {line}" for line in validity_warnings(agreement, now)),
    ]
    for party in agreement.party_infos:
        lines += _party_lines(party, now)
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- parsers


def add_cpa_commands(sub: Subcommands) -> None:
    """Add ``msh cpa`` and its subcommands validate, show, add, remove, reload, new and list."""
    cpa = sub.add_parser(
        "cpa",
        help="work with CPP/CPA 2.0 agreements",
        description="Work with CPP/CPA 2.0 agreement files.",
    )
    cpa_sub = cpa.add_subparsers(dest="cpa_command", metavar="SUBCOMMAND", required=True)
    validate = add_command(
        cpa_sub,
        "validate",
        _validate,
        help="check agreement files and list every problem",
        description=(
            "Load each CPP/CPA 2.0 agreement FILE as the MSH does: hardened XML parsing, the CPP/A 2.0 schema, "
            "every reference (channels, transports, doc exchanges, certificates, security details), durations, "
            "certificates, algorithm URIs and the agreement's own signature. Durations counting months or years "
            "(P1M, P1Y) are legal and load. Prints one line 'file:line: path: message' per error, one line "
            "'file:line: path: Warning: message' per warning (e.g. a ds:Signature left as an unfilled template: "
            "the agreement loads as unsigned), and 'FILE: ok' for a file that loads. Exit status 0 if every file "
            "loads (with or without warnings), 1 if any has an error. An agreement outside its validity window "
            "(tp:Start..tp:End), or with a certificate that has expired or is not valid yet, loads with a line "
            "'FILE: Warning: ...' for each (msh serve warns the same at start) and exit status 0: it is a "
            "well-formed agreement that does not work now; the last line then reads 'FILE: ok with N warnings'."
        ),
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="agreement file(s) to check")
    show = add_command(
        cpa_sub,
        "show",
        _show,
        help="print a readable summary of an agreement",
        description=(
            "Print a readable summary of the CPP/CPA 2.0 agreement FILE: cpaid, status, validity window (and "
            "whether it is in force now), each party with its PartyIds, roles, services and the actions it sends "
            "and receives with the channel each uses, and each channel's reliability (acknowledgments, duplicate "
            "elimination, sync reply, retries, retry interval, persist duration, in words such as '1 month 2 "
            "days') and security (signing, encryption, TLS and client authentication, endpoint), each "
            "certificate with its subject and expiry, and the warnings 'msh cpa validate' gives. --json prints "
            "the agreement's identity, window, parties, actions, certificates (subject, issuer, validity, days "
            "left) and warnings with camelCase keys. Reads every agreement 'msh cpa validate' accepts. Exit "
            "status 1 (with the problems) if the file does not load."
        ),
    )
    show.add_argument("file", metavar="FILE", help="agreement file to show")
    show.add_argument("--json", action="store_true", help="print JSON (camelCase keys) instead of the summary")
    add_change_commands(cpa_sub)
    add_cpa_new_command(cpa_sub)
    add_command(
        cpa_sub,
        "list",
        _list,
        help="list the agreements the MSH is configured with",
        description="List the agreements named by agreements.paths that this party is in: status, window, partner.",
        config=True,
    )
