"""A readable summary of an ebXML message and its validation verdict (``msh message inspect``).

The summary is plain data whose keys are camelCase, as all JSON the project prints (``msh status --json``,
the REST API, the inbox's ``message.json``). A rejected message is summarised too, with everything that
could still be read of it (:func:`~msh.ebms.salvage.salvage_message_file`) and how far reading got.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msh.ebms.envelope import SalvagedEnvelope, SalvagedHeader, SalvagedParty, format_datetime
from msh.ebms.message import EbxmlMessage, ParseMode, read_message_file
from msh.ebms.model import Envelope, MessageHeader, Party
from msh.ebms.salvage import Salvage, salvage_message_file
from msh.errors import EbmsError, Issue

__all__ = ["header_lines", "inspect_file", "render_text", "summarise", "summarise_salvage"]


def _party(p: Party) -> dict[str, Any]:
    return {"partyIds": [{"value": i.value, "type": i.type} for i in p.party_ids], "role": p.role}


def _salvaged_party(p: SalvagedParty | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"partyIds": [{"value": value, "type": type_} for value, type_ in p.party_ids], "role": p.role}


def _issue(i: Issue) -> dict[str, str]:
    return {
        "errorCode": i.error_code.value,
        "severity": i.severity.value,
        "location": i.location,
        "description": i.description,
    }


def _kind(*, fault: bool, error_list: bool, acknowledgment: bool, manifest: bool, request: bool, response: bool) -> str:
    if fault:
        return "SOAP Fault"
    if error_list:
        return "error message (ErrorList)"
    if acknowledgment and not manifest:
        return "acknowledgment"
    if request:
        return "status request"
    if response:
        return "status response"
    return "message"


def _header(mh: MessageHeader) -> dict[str, Any]:
    md = mh.message_data
    return {
        "from": _party(mh.from_party),
        "to": _party(mh.to_party),
        "cpaId": mh.cpa_id,
        "conversationId": mh.conversation_id,
        "service": {"value": mh.service.value, "type": mh.service.type},
        "action": mh.action,
        "messageId": md.message_id,
        "timestamp": format_datetime(md.timestamp),
        "refToMessageId": md.ref_to_message_id,
        "timeToLive": format_datetime(md.time_to_live) if md.time_to_live else None,
        "duplicateElimination": mh.duplicate_elimination,
    }


def _salvaged_header(mh: SalvagedHeader) -> dict[str, Any]:
    return {
        "from": _salvaged_party(mh.from_party),
        "to": _salvaged_party(mh.to_party),
        "cpaId": mh.cpa_id,
        "conversationId": mh.conversation_id,
        "service": {"value": mh.service, "type": mh.service_type} if mh.service is not None else None,
        "action": mh.action,
        "messageId": mh.message_id,
        "timestamp": mh.timestamp,
        "refToMessageId": mh.ref_to_message_id,
        "timeToLive": mh.time_to_live,
        "duplicateElimination": mh.duplicate_elimination,
    }


def _elements(env: Envelope | SalvagedEnvelope) -> dict[str, Any]:
    """The ebXML elements other than the MessageHeader, read whole (a salvaged envelope has those its
    readers took)."""
    out: dict[str, Any] = {
        "ackRequested": [{"actor": a.actor, "signed": a.signed} for a in env.ack_requested],
        "acknowledgments": [
            {"actor": a.actor, "refToMessageId": a.ref_to_message_id, "timestamp": format_datetime(a.timestamp)}
            for a in env.acknowledgments
        ],
        "syncReply": env.sync_reply is not None,
        "messageOrder": (
            {"sequenceNumber": env.message_order.sequence_number, "status": env.message_order.status.value}
            if env.message_order
            else None
        ),
        "signed": bool(env.signatures),
    }
    if env.error_list is not None:
        out["errorList"] = {
            "highestSeverity": env.error_list.highest_severity.value,
            "errors": [
                {
                    "errorCode": e.error_code,
                    "severity": e.severity.value,
                    "location": e.location,
                    "description": e.description.text if e.description else None,
                }
                for e in env.error_list.errors
            ],
        }
    if env.fault is not None:
        out["fault"] = {"faultCode": env.fault.faultcode, "faultString": env.fault.faultstring}
    out["manifest"] = [
        {"href": r.href, "descriptions": [d.text for d in r.descriptions]}
        for r in (env.manifest.references if env.manifest else ())
    ]
    return out


def _envelope(env: Envelope) -> dict[str, Any]:
    kind = _kind(
        fault=env.fault is not None,
        error_list=env.error_list is not None,
        acknowledgment=bool(env.acknowledgments),
        manifest=env.manifest is not None,
        request=env.status_request is not None,
        response=env.status_response is not None,
    )
    header = {"messageHeader": _header(env.message_header)} if env.message_header is not None else {}
    return {"kind": kind, **header, **_elements(env)}


def _salvaged(env: SalvagedEnvelope) -> dict[str, Any]:
    # The kind from the elements found, read or not: an Acknowledgment with a bad Timestamp is still one.
    found = env.present
    kind = _kind(
        fault="Fault" in found,
        error_list="ErrorList" in found,
        acknowledgment="Acknowledgment" in found,
        manifest="Manifest" in found,
        request="StatusRequest" in found,
        response="StatusResponse" in found,
    )
    header = {"messageHeader": _salvaged_header(env.message_header)} if env.message_header is not None else {}
    return {"kind": kind, **header, **_elements(env)}


def summarise(message: EbxmlMessage) -> dict[str, Any]:
    """The message as plain data (what ``--json`` prints), camelCase keys."""
    read = _envelope(message.envelope)
    out: dict[str, Any] = {"kind": read.pop("kind"), "contentType": message.content_type, **read}
    out["payloads"] = [
        {"contentId": p.content_id, "contentType": p.content_type, "size": p.body.size} for p in message.payloads
    ]
    return out


def summarise_salvage(salvage: Salvage) -> dict[str, Any]:
    """What could be read of a rejected message, as plain data in the shape of :func:`summarise`, with
    ``reading``: how far reading got, one sentence per step."""
    out: dict[str, Any] = {"reading": list(salvage.steps)}
    read = (
        _envelope(salvage.envelope)
        if salvage.envelope is not None
        else _salvaged(salvage.salvaged)
        if salvage.salvaged is not None
        else {}
    )
    if "kind" in read:
        out["kind"] = read.pop("kind")
    out["contentType"] = salvage.content_type
    out.update(read)
    out["payloads"] = [
        {"contentId": p.content_id, "contentType": p.content_type, "size": p.size} for p in salvage.payloads
    ]
    return out


def inspect_file(path: str | Path) -> dict[str, Any]:
    """Read ``path`` leniently, judge it strictly, and summarise both.

    The verdict is ``valid`` when strict parsing accepts the message, ``accepted-with-warnings`` when only
    lenient parsing does, and ``rejected`` when neither does: then ``errors`` says why (the first error
    the reader met, and those of other elements read on their own) and the summary holds what could still
    be read of it (:func:`summarise_salvage`).
    """
    result: dict[str, Any] = {"file": str(path), "verdict": ""}  # the verdict, decided below, comes first
    try:
        message = read_message_file(path, mode=ParseMode.LENIENT)
    except EbmsError as exc:
        result["verdict"] = "rejected"
        return _rejected(result, path, exc)
    except OSError as exc:
        result["verdict"] = "unreadable"
        result["errors"] = [{"errorCode": "", "severity": "Error", "location": "", "description": str(exc)}]
        return result
    try:
        result.update(summarise(message))
        result["warnings"] = [_issue(i) for i in message.warnings]
    finally:
        message.close()
    try:
        read_message_file(path, mode=ParseMode.STRICT).close()
    except EbmsError as exc:
        result["verdict"] = "accepted-with-warnings"
        result["strictErrors"] = [_issue(i) for i in exc.issues]
    else:
        result["verdict"] = "valid"
    return result


def _rejected(result: dict[str, Any], path: str | Path, exc: EbmsError) -> dict[str, Any]:
    issues = list(exc.issues)
    try:
        salvage = salvage_message_file(path)
    except OSError:  # gone since it was read: the errors are all there is
        result["errors"] = [_issue(i) for i in issues]
        return result
    if salvage.salvaged is not None:
        issues += [p for p in salvage.salvaged.problems if p not in issues]
    result["errors"] = [_issue(i) for i in issues]
    result.update(summarise_salvage(salvage))
    return result


def _shown(value: str | None) -> str:
    """A header value for the text: as it is, or what stands in its place."""
    if value is None:
        return "(absent)"
    return value if value else "(empty)"


def _party_text(p: dict[str, Any] | None) -> str:
    if p is None:
        return "(absent)"
    ids = ", ".join(_shown(i["value"]) + _typed(i["type"]) for i in p["partyIds"])
    return (ids or "(no PartyId)") + (f", role {_shown(p['role'])}" if p["role"] is not None else "")


def _typed(type_: str | None) -> str:
    return f" (type {_shown(type_)})" if type_ is not None else ""


def header_lines(mh: dict[str, Any]) -> list[str]:
    """The text lines (indented by two spaces) of a ``messageHeader`` as :func:`summarise` gives it."""
    service = mh["service"]
    service_text = "(absent)" if service is None else _shown(service["value"]) + _typed(service["type"])
    lines = [
        f"  from: {_party_text(mh['from'])}",
        f"  to: {_party_text(mh['to'])}",
        f"  cpa: {_shown(mh['cpaId'])}   conversation: {_shown(mh['conversationId'])}",
        f"  service: {service_text}   action: {_shown(mh['action'])}",
        f"  message id: {_shown(mh['messageId'])}   timestamp: {_shown(mh['timestamp'])}",
    ]
    if mh["refToMessageId"] is not None:
        lines.append(f"  in reply to: {_shown(mh['refToMessageId'])}")
    if mh["timeToLive"] is not None:
        lines.append(f"  time to live: {_shown(mh['timeToLive'])}")
    return lines


def render_text(result: dict[str, Any]) -> str:
    """A human-readable rendering of :func:`inspect_file`'s result."""
    verdict = result["verdict"]
    if verdict == "rejected":
        verdict += " (the errors below say why; what follows is what could be read of it, not accepted)"
    lines = [f"{result['file']}", f"  verdict: {verdict}"]
    if result.get("reading"):
        lines.append("  read:")
        lines += [f"    {step}" for step in result["reading"]]
    if "kind" in result:
        kind = f"  kind: {result['kind']}"
        lines.append(kind + (f"  ({result['contentType']})" if result.get("contentType") else ""))
    mh = result.get("messageHeader")
    if mh:
        lines += header_lines(mh)
        flags = []
        if mh["duplicateElimination"]:
            flags.append("DuplicateElimination")
        for a in result["ackRequested"]:
            flags.append(f"AckRequested({a['actor'] or 'toPartyMSH'}, signed={str(a['signed']).lower()})")
        if result["syncReply"]:
            flags.append("SyncReply")
        if result["messageOrder"]:
            flags.append(f"MessageOrder({result['messageOrder']['sequenceNumber']})")
        if result["signed"]:
            flags.append("ds:Signature")
        if flags:
            lines.append("  reliability/security: " + ", ".join(flags))
    for ack in result.get("acknowledgments", []):
        lines.append(f"  acknowledges: {ack['refToMessageId']} at {ack['timestamp']}")
    if "errorList" in result:
        lines.append(f"  error list (highest severity {result['errorList']['highestSeverity']}):")
        for e in result["errorList"]["errors"]:
            lines.append(f"    {e['severity']} {e['errorCode']} at {e['location'] or '-'}: {e['description'] or ''}")
    if "fault" in result:
        lines.append(f"  SOAP Fault {result['fault']['faultCode']}: {result['fault']['faultString']}")
    for ref in result.get("manifest", []):
        lines.append(f"  manifest: {ref['href']}")
    for p in result.get("payloads", []):
        cid = f"<{p['contentId']}>" if p["contentId"] is not None else "(no Content-ID)"
        lines.append(f"  payload: {cid} {p['contentType']} {p['size']} bytes")
    for key, title in (("errors", "errors"), ("strictErrors", "strict mode rejects it"), ("warnings", "warnings")):
        if result.get(key):
            lines.append(f"  {title}:")
            for i in result[key]:
                where = f" at {i['location']}" if i["location"] else ""
                lines.append(f"    {i['severity']} {i['errorCode']}{where}: {i['description']}")
    return "\n".join(lines)
