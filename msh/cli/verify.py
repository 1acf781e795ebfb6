"""``msh message verify FILE…``: check the ebMS signature (ebMS2 §4.1.3) of saved messages.

Each FILE is read as ``msh message inspect`` reads it (a raw HTTP capture, a header dump, a MIME package or
a bare SOAP envelope). The certificate comes from, in this order of preference:

* ``--cpa FILE``: the agreement; the From party's signing certificate (its sending channel's
  SigningCertificateRef), checked against the receiver's trust anchors, algorithms as the agreement says;
* ``--cert PEM``: the given certificate(s), trusted as they are;
* ``--keyinfo``: the certificate the message carries in its KeyInfo: for looking at captures only, it
  shows that the message is intact, not who sent it.

Certificates are checked for validity at the message's Timestamp (else now). A file that does not verify
is shown with what could be read of its MessageHeader (as ``msh message inspect`` reads it, also when the
message is rejected), so that the reason can be put against the parties, CPAId and action; a message the
agreement does not govern is one of those. ``--json`` prints the same with camelCase keys. Exit status 0
when every file verifies, 1 when any does not, 2 on bad usage or an unreadable file or agreement. Each
file gets its verdict and the next is checked, whatever stopped the one before (a signature whose KeyInfo
carries no certificate under ``--keyinfo``, a file that cannot be parsed or verified).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from msh.cli.common import Subcommands, add_command, readable_files
from msh.errors import ConfigurationError, EbmsError

if TYPE_CHECKING:
    from cryptography import x509

    from cpa.model import CollaborationProtocolAgreement
    from msh.ebms.message import EbxmlMessage
    from msh.security import Payload, Verification

__all__ = ["add_verify_command"]

_NOTE_KEYINFO = "with the certificate the message carries: this shows the message is intact, not who sent it"


def _payloads(message: EbxmlMessage) -> dict[str, Payload]:
    """Content-ID -> content, in package order; a part without Content-ID gets a name that no Reference
    can match, so that it is reported as not covered by the signature."""
    return {
        (part.content_id or f"(part {i} without a Content-ID)"): part.body for i, part in enumerate(message.payloads, 2)
    }


def _at(message: EbxmlMessage) -> datetime:
    header = message.envelope.message_header
    if header is None:
        return datetime.now(UTC)
    stamp = header.message_data.timestamp
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


class _NotGoverned(Exception):
    """The agreement given does not govern the message: a verdict on that file, not a usage error."""


def _with_agreement(message: EbxmlMessage, cpa: CollaborationProtocolAgreement, at: datetime) -> Verification | None:
    from cpa.check import check
    from msh.security import content_locations, verification_policy, verify_message

    result = check(message.envelope, cpa, now=at)
    if result.sending_channel_id is None:
        wrong = "; ".join(i.description for i in result.errors) or "no sending channel of its From party matches"
        raise _NotGoverned(f"agreement {cpa.cpaid} does not govern this message ({wrong})")
    policy = verification_policy(cpa, result.sending_channel_id, result.receiving_channel_id)
    verification = verify_message(
        message.soap, _payloads(message), policy, at=at, locations=content_locations(message.payloads)
    )
    return verification


def _one(path: str, args: argparse.Namespace, cpa: CollaborationProtocolAgreement | None) -> dict[str, Any]:
    from msh.ebms.inspect import summarise, summarise_salvage
    from msh.ebms.message import ParseMode, read_message_file
    from msh.ebms.salvage import salvage_message_file
    from msh.security import content_locations, keyinfo_certificates, load_certificates, verify
    from msh.security.profile import first_signature
    from msh.security.verifying import reference_location

    out: dict[str, Any] = {"file": path, "verified": False, "certificateFrom": args.source}
    try:
        message = read_message_file(path, mode=ParseMode.LENIENT)
    except EbmsError as exc:
        out["errors"] = [_issue(i) for i in exc.issues]
        # What can still be read of a rejected message: who sent it, under which agreement (as inspect shows).
        header = summarise_salvage(salvage_message_file(path)).get("messageHeader")
        return out | ({"messageHeader": header} if header is not None else {})
    header = summarise(message).get("messageHeader")
    if header is not None:
        out["messageHeader"] = header
    try:
        at = _at(message)
        out["checkedAt"] = at.isoformat()
        verification: Verification | None
        if cpa is not None:
            try:
                verification = _with_agreement(message, cpa, at)
            except _NotGoverned as exc:
                out["errors"] = [{"location": "", "description": str(exc)}]
                return out
            if verification is None:
                out["errors"] = [
                    {
                        "location": "",
                        "description": "the message is not signed, and the agreement "
                        "does not ask for it (no SenderNonRepudiation on its channel)",
                    }
                ]
                return out
        else:
            trusted: tuple[x509.Certificate, ...]
            if args.keyinfo:
                from msh.safexml import XmlLimits, parse_xml

                root = parse_xml(message.soap, limits=XmlLimits(max_bytes=max(len(message.soap), 1)))
                signature = first_signature(root)
                trusted = keyinfo_certificates(signature) if signature is not None else ()
                if signature is not None and not trusted:
                    # A verdict on this file, not on the command: the other files are still checked.
                    out["errors"] = [
                        {
                            "location": "//Header/Signature/KeyInfo",
                            "description": "the signature's KeyInfo carries no X509Certificate to verify it "
                            "with; verify this file with --cert or --cpa",
                        }
                    ]
                    return out
                out["note"] = _NOTE_KEYINFO
            else:
                trusted = load_certificates(args.cert)
            verification = verify(
                message.soap,
                _payloads(message),
                trusted[:1] if args.keyinfo else trusted,
                at=at,
                locations=content_locations(message.payloads),
            )
    except EbmsError as exc:
        out["errors"] = [_issue(i) for i in exc.issues]
        return out
    finally:
        message.close()
    out["verified"] = True
    out["signer"] = verification.signer.subject.rfc4514_string()
    out["signatureAlgorithm"] = verification.signature_algorithm
    out["references"] = [
        {"uri": r.uri, "location": reference_location(r.uri), "digestAlgorithm": r.digest_algorithm}
        for r in verification.references
    ]
    # ebMS2 §4.1.3: only the payloads "requiring signing" have a Reference; the others are said so.
    out["unsignedPayloads"] = [f"cid:{cid}" for cid in verification.unsigned_payloads]
    out["warnings"] = [_issue(w) for w in verification.warnings]
    return out


def _judged(path: str, args: argparse.Namespace, cpa: CollaborationProtocolAgreement | None) -> dict[str, Any]:
    """:func:`_one`, with whatever stops the check of this one file (a certificate that cannot be used, the
    file gone or unreadable since the start) reported as its verdict, so the next files are still checked."""
    try:
        return _one(path, args, cpa)
    except (ConfigurationError, OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return {"file": path, "verified": False, "certificateFrom": args.source, "errors": [_error(reason)]}


def _error(description: str) -> dict[str, str]:
    return {"location": "", "description": description}


def _issue(issue: Any) -> dict[str, str]:
    return {"location": issue.location, "description": issue.description}


def _render(result: dict[str, Any]) -> str:
    from msh.ebms.inspect import header_lines

    if result["verified"]:
        refs = ", ".join(r["uri"] or "the envelope" for r in result["references"])
        algorithm = result["signatureAlgorithm"].rsplit("#", 1)[-1]
        lines = [f"{result['file']}: verified (signed by {result['signer']}, {algorithm}; References: {refs})"]
        if "note" in result:
            lines.append(f"  note: {result['note']}")
        lines += [f"  warning: {w['description']} (at {w['location']})" for w in result["warnings"]]
        return "\n".join(lines)
    errors = result.get("errors", [])

    def where(error: dict[str, str]) -> str:
        return f" (at {error['location']})" if error["location"] else ""

    head = f": {errors[0]['description']}{where(errors[0])}" if errors else ""
    lines = [f"{result['file']}: not verified{head}"]
    lines += [f"  also: {e['description']}{where(e)}" for e in errors[1:]]
    if "messageHeader" in result:
        lines += header_lines(result["messageHeader"])
    return "\n".join(lines)


def _verify(args: argparse.Namespace) -> int:
    """0 when every file verifies, 1 when any does not."""
    readable_files(args.files)
    cpa = None
    if args.cpa is not None:
        from cpa import CpaError, load

        try:
            cpa = load(args.cpa)
        except CpaError as exc:
            first = exc.problems[0] if exc.problems else exc
            raise ConfigurationError(f"--cpa {args.cpa} cannot be used: {first}") from None
    elif args.cert is not None:
        from msh.security import load_certificates

        load_certificates(args.cert)  # a bad --cert is a usage error, before any file is judged
    args.source = "agreement" if args.cpa else "certificate file" if args.cert else "KeyInfo"
    results = [_judged(path, args, cpa) for path in args.files]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        print("\n".join(_render(r) for r in results))
    return 0 if all(r["verified"] for r in results) else 1


def add_verify_command(message_sub: Subcommands) -> None:
    """Add ``msh message verify``."""
    verify = add_command(
        message_sub,
        "verify",
        _verify,
        help="verify the ebMS signature of message files",
        description=(
            "Verify the ebMS 2.0 signature (ebMS2 §4.1.3: the envelope, all but its nextMSH/next elements, and "
            "each payload part) of each message FILE (a raw HTTP capture, a header dump, a MIME package or a "
            "bare SOAP envelope). Prints 'verified' with the signer, or why not with the Reference that failed "
            "(its cid: URI, or the envelope's Reference). The certificate is the From party's in the agreement "
            "(--cpa), the given one (--cert), or the one the message carries (--keyinfo: for captures only, it "
            "proves the message intact, not who sent it); its validity is checked at the message's Timestamp. "
            "A file that does not verify (a message the agreement does not govern too) is shown with the "
            "MessageHeader fields that could be read of it. Payloads encrypted with XMLENC must be decrypted "
            "first. Each file gets its verdict and the next one is checked (a signature whose KeyInfo carries no "
            "certificate, under --keyinfo, is that file's failure). --json prints the same with camelCase keys. "
            "Exit status 0 only when every file verifies, 1 otherwise."
        ),
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="message file(s) to verify")
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument("--cpa", metavar="FILE", help="the agreement: verify with the From party's signing certificate")
    source.add_argument("--cert", metavar="PEM", help="verify with the certificate(s) in this PEM (or DER) file")
    source.add_argument(
        "--keyinfo", action="store_true", help="verify with the certificate the message carries (captures only)"
    )
    verify.add_argument("--json", action="store_true", help="print the results as JSON")
