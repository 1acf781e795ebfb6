"""The ``msh`` command line.

Subcommands:

- ``msh message inspect FILE…``: summarise ebXML message files (raw HTTP capture, header dump, MIME
  package, or bare SOAP envelope) with their validation verdict; ``--json`` for machines. Exit status 0 when every file
  is valid, 1 when any is only accepted leniently or rejected, 2 on bad usage.
- ``msh demo``: the two-partner reliable-messaging demo (``--codec``: round-trip the sample messages).
- ``msh serve | send | status | inbox``, ``msh cpa list``: the running MSH (:mod:`msh.runtime.commands`).
- ``msh cpa validate FILE…``: load CPP/CPA 2.0 agreements and list every problem, one line each
  (``file:line: path: message``; a warning reads ``file:line: path: Warning: message``); exit status 0
  when every file loads (warnings or not), 1 when any has an error.
- ``msh cpa show FILE``: a readable summary of one agreement (any agreement ``validate`` accepts):
  parties, roles, actions and the channels they use, with each channel's reliability and security.

Bad input never ends in a traceback: a usage error, a bad file or setting, a busy port, a refused
submission print one line on stderr, ``msh <command>: error: <what is wrong, where, what to do>``, and
exit with status 2; Ctrl-C prints ``msh: interrupted`` and exits with 130; an unexpected failure (a bug)
prints one line and exits with 70. ``msh --debug COMMAND`` adds the traceback to each of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

from msh.errors import MshError

if TYPE_CHECKING:
    from cpa.duration import XsDuration
    from cpa.model import CollaborationProtocolAgreement, DeliveryChannel, EbxmlBinding, PartyInfo, TransportSecurity

__all__ = ["main"]


def _message_files(paths: Sequence[str]) -> None:
    """Refuse, in one line, a message file that cannot be read (before any report is printed)."""
    from msh.errors import ConfigurationError

    for path in paths:
        if os.path.isdir(path):
            raise ConfigurationError(f"{path} is a folder; give the message files in it (e.g. {path}/*.http)")
        if not os.path.exists(path):
            raise ConfigurationError(f"{path}: no such file; check the path")
        if not os.access(path, os.R_OK):
            raise ConfigurationError(f"{path}: permission denied; make the file readable or copy it")


def _cmd_message_inspect(args: argparse.Namespace) -> int:
    from msh.ebms.inspect import inspect_file, render_text

    _message_files(args.files)
    results = [inspect_file(path) for path in args.files]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print("\n\n".join(render_text(r) for r in results))
    return 0 if all(r["verdict"] == "valid" for r in results) else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.codec:
        from msh.demo import run_demo

        return run_demo(args.samples)
    from msh.exchange_demo import run_exchange_demo

    return run_exchange_demo(messages=args.messages, loss=args.loss, keep=args.keep)


def _cmd_cpa_validate(args: argparse.Namespace) -> int:
    from cpa import CpaError, load

    failed = False
    for path in args.files:
        try:
            agreement = load(path)
        except CpaError as exc:
            failed = True
            for problem in exc.problems:
                print(problem)
        else:
            for warning in agreement.warnings:
                print(warning)
            count = len(agreement.warnings)
            noted = f" with {count} warning{'' if count == 1 else 's'}" if count else ""
            print(f"{path}: ok{noted} (cpaid {agreement.cpaid}, status {agreement.status.value})")
    return 1 if failed else 0


def _cmd_cpa_show(args: argparse.Namespace) -> int:
    from cpa import CpaError, load

    try:
        agreement = load(args.file)
    except CpaError as exc:
        for problem in exc.problems:
            print(problem)
        return 1
    print(_render_agreement(agreement, datetime.now(UTC)))
    return 0


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


def _party_lines(party: PartyInfo) -> list[str]:
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
    certificates = ", ".join(f"{c.cert_id} ({len(c.x509)} X.509)" for c in party.certificates) or "none"
    lines.append(f"  certificates: {certificates}")
    lines.append(f"  default MSH channel: {party.default_msh_channel.channel_id}")
    for channel in party.delivery_channels:
        lines += ["  " + line for line in _channel_lines(channel)]
    return lines


def _render_agreement(agreement: CollaborationProtocolAgreement, now: datetime) -> str:
    if agreement.is_valid_at(now):
        window = "in force now"
    elif now < agreement.start:
        window = "not yet in force"
    else:
        window = "expired"
    version = f" (version {agreement.version})" if agreement.version else ""
    lines = [
        agreement.source,
        f"cpaid: {agreement.cpaid}{version}",
        f"status: {agreement.status.value}",
        f"valid: {agreement.start.isoformat()} to {agreement.end.isoformat()} ({window})",
        f"signed: {'yes, signature verified' if agreement.signed else 'no'}",
        *(str(warning) for warning in agreement.warnings),
    ]
    for party in agreement.party_infos:
        lines += _party_lines(party)
    return "\n".join(lines)


EXIT_USAGE = 2
"""Exit status of a usage or user error (bad argument, file, setting, busy port, refused submission)."""
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), except for ``msh serve``, for which stopping is normal."""
EXIT_INTERNAL = 70
"""Exit status of an unexpected failure (a bug: please report it with the ``--debug`` traceback)."""

_EPILOG = """\
exit status: 0 success; 1 the command's own "no" (see its --help: an invalid file, a failed or unknown
message, a message not taken); 2 a usage or user error, explained in one line on stderr; 3 msh send --wait
without a final outcome; 70 an unexpected failure (a bug); 130 interrupted (Ctrl-C).
--debug (before or after COMMAND) adds the Python traceback to any error line."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line: ``msh inbox: error: argument --limit: ... (see msh inbox --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_debug(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the Python traceback of an error (for reports)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="msh",
        description=(
            "ebXML Messaging 2.0 Message Service Handler: run an MSH (serve), send messages and follow them\n"
            "(send, status), take the received ones (inbox); tools for message files and CPP/CPA agreements\n"
            "(message, cpa) and the two-partner demo (demo). Every command has --help."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_debug(parser, False)
    from msh.runtime.commands import add_commands, fraction, positive_int

    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    message = sub.add_parser(
        "message", help="work with ebXML message files", description="Work with ebXML message files."
    )
    message_sub = message.add_subparsers(dest="message_command", metavar="SUBCOMMAND", required=True)
    inspect = message_sub.add_parser(
        "inspect",
        help="summarise message files and their validation verdict",
        description=(
            "Print a readable summary of each ebXML message FILE (a raw HTTP capture; a header dump: header "
            "lines without a request line, 'Name:value' with no space after the colon, the first MIME boundary "
            "right after the last header; a MIME package with or without its Content-Type line; or a bare SOAP "
            "envelope) and its verdict: 'valid' (strict parsing "
            "accepts it), 'accepted-with-warnings' (only lenient parsing does; the warnings say why), or "
            "'rejected' (with the ebMS errorCode, severity and location of each problem). Exit status 0 if "
            "every file is valid, 1 otherwise."
        ),
    )
    inspect.add_argument("files", nargs="+", metavar="FILE", help="message file(s) to inspect")
    inspect.add_argument("--json", action="store_true", help="print the result as JSON")
    inspect.set_defaults(func=_cmd_message_inspect)

    demo = sub.add_parser(
        "demo",
        help="run the two-partner reliable-messaging demo",
        description=(
            "Start partners A and B of samples/cpas/demo-a-b.xml as two MSH processes (ports 8081, 8082 and "
            "18082 on 127.0.0.1; each with its own SQLite file in a temporary folder), send reliable messages "
            "from A to B through a lossy stretch that loses requests and acknowledgments, and print what each "
            "side saw. Exit status 0 when every message was delivered exactly once. With --codec: parse, "
            "validate and round-trip the sample message files instead."
        ),
    )
    demo.add_argument(
        "--messages", type=positive_int, default=100, metavar="N", help="how many messages A sends (default 100)"
    )
    demo.add_argument(
        "--loss",
        type=fraction,
        default=0.15,
        metavar="RATE",
        help="share of requests and of responses lost in the lossy stretch, 0 to 1 exclusive (default 0.15)",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the work folder (stores, logs) after a successful run too"
    )
    demo.add_argument("--codec", action="store_true", help="run the codec demo over the sample message files")
    demo.add_argument("--samples", default=None, help="with --codec: folder of sample messages")
    demo.set_defaults(func=_cmd_demo)

    cpa = sub.add_parser(
        "cpa",
        help="work with CPP/CPA 2.0 agreements",
        description="Work with CPP/CPA 2.0 agreement files.",
    )
    cpa_sub = cpa.add_subparsers(dest="cpa_command", metavar="SUBCOMMAND", required=True)
    validate = cpa_sub.add_parser(
        "validate",
        help="check agreement files and list every problem",
        description=(
            "Load each CPP/CPA 2.0 agreement FILE as the MSH does: hardened XML parsing, the CPP/A 2.0 schema, "
            "every reference (channels, transports, doc exchanges, certificates, security details), durations, "
            "certificates, algorithm URIs and the agreement's own signature. Durations counting months or years "
            "(P1M, P1Y) are legal and load. Prints one line 'file:line: path: message' per error, one line "
            "'file:line: path: Warning: message' per warning (e.g. a ds:Signature left as an unfilled template: "
            "the agreement loads as unsigned), and 'FILE: ok' for a file that loads. Exit status 0 if every file "
            "loads (with or without warnings), 1 if any has an error. An expired agreement is not a problem here."
        ),
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="agreement file(s) to check")
    validate.set_defaults(func=_cmd_cpa_validate)
    show = cpa_sub.add_parser(
        "show",
        help="print a readable summary of an agreement",
        description=(
            "Print a readable summary of the CPP/CPA 2.0 agreement FILE: cpaid, status, validity window (and "
            "whether it is in force now), each party with its PartyIds, roles, services and the actions it sends "
            "and receives with the channel each uses, and each channel's reliability (acknowledgments, duplicate "
            "elimination, sync reply, retries, retry interval, persist duration, in words such as '1 month 2 "
            "days') and security (signing, encryption, TLS and client authentication, endpoint), and the "
            "warnings 'msh cpa validate' gives. Reads every agreement 'msh cpa validate' accepts. Exit status 1 "
            "(with the problems) if the file does not load."
        ),
    )
    show.add_argument("file", metavar="FILE", help="agreement file to show")
    show.set_defaults(func=_cmd_cpa_show)

    add_commands(sub, cpa_sub)
    for leaf in _leaves(parser):
        if leaf is not parser:
            _add_debug(leaf, argparse.SUPPRESS)  # also after COMMAND; SUPPRESS keeps a --debug given before it
    return parser


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand parser under it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _leaves(child)
    return found


def _command(args: argparse.Namespace) -> str:
    words = ["msh"] + [
        getattr(args, name) for name in ("command", "message_command", "cpa_command") if getattr(args, name, None)
    ]
    return " ".join(words)


def _say(args: argparse.Namespace, line: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc(file=sys.stderr)
    print(f"{_command(args)}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``msh`` console script: the exit status (see the module docs)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()
        return result
    except KeyboardInterrupt:
        _say(args, "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): nothing more to say, to anyone.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except MshError as exc:
        _say(args, f"error: {exc}")
        return EXIT_USAGE
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        _say(args, f"error:{where}: {exc.strerror or exc}")
        return EXIT_USAGE
    except Exception as exc:
        hint = "" if getattr(args, "debug", False) else "; run it again with --debug for the traceback"
        _say(args, f"internal error: {type(exc).__name__}: {exc}{hint} and report it")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
