"""A readable summary of an ebXML message and its validation verdict (``msh message inspect``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msh.ebms.envelope import format_datetime
from msh.ebms.message import EbxmlMessage, ParseMode, read_message_file
from msh.ebms.model import Envelope, Party
from msh.errors import EbmsError, Issue

__all__ = ["inspect_file", "render_text"]


def _party(p: Party) -> dict[str, Any]:
    return {"party_ids": [{"value": i.value, "type": i.type} for i in p.party_ids], "role": p.role}


def _issue(i: Issue) -> dict[str, str]:
    return {
        "errorCode": i.error_code.value,
        "severity": i.severity.value,
        "location": i.location,
        "description": i.description,
    }


def _kind(env: Envelope) -> str:
    if env.fault is not None:
        return "SOAP Fault"
    if env.error_list is not None:
        return "error message (ErrorList)"
    if env.acknowledgments and env.manifest is None:
        return "acknowledgment"
    if env.status_request is not None:
        return "status request"
    if env.status_response is not None:
        return "status response"
    return "message"


def summarise(message: EbxmlMessage) -> dict[str, Any]:
    """The message as plain data (what ``--json`` prints)."""
    env = message.envelope
    out: dict[str, Any] = {"kind": _kind(env), "content_type": message.content_type}
    mh = env.message_header
    if mh is not None:
        md = mh.message_data
        out["message_header"] = {
            "from": _party(mh.from_party),
            "to": _party(mh.to_party),
            "cpa_id": mh.cpa_id,
            "conversation_id": mh.conversation_id,
            "service": {"value": mh.service.value, "type": mh.service.type},
            "action": mh.action,
            "message_id": md.message_id,
            "timestamp": format_datetime(md.timestamp),
            "ref_to_message_id": md.ref_to_message_id,
            "time_to_live": format_datetime(md.time_to_live) if md.time_to_live else None,
            "duplicate_elimination": mh.duplicate_elimination,
        }
    out["ack_requested"] = [{"actor": a.actor, "signed": a.signed} for a in env.ack_requested]
    out["acknowledgments"] = [
        {"actor": a.actor, "ref_to_message_id": a.ref_to_message_id, "timestamp": format_datetime(a.timestamp)}
        for a in env.acknowledgments
    ]
    out["sync_reply"] = env.sync_reply is not None
    out["message_order"] = (
        {"sequence_number": env.message_order.sequence_number, "status": env.message_order.status.value}
        if env.message_order
        else None
    )
    out["signed"] = bool(env.signatures)
    if env.error_list is not None:
        out["error_list"] = {
            "highest_severity": env.error_list.highest_severity.value,
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
        out["fault"] = {"faultcode": env.fault.faultcode, "faultstring": env.fault.faultstring}
    out["manifest"] = [
        {"href": r.href, "descriptions": [d.text for d in r.descriptions]}
        for r in (env.manifest.references if env.manifest else ())
    ]
    out["payloads"] = [
        {"content_id": p.content_id, "content_type": p.content_type, "size": p.body.size} for p in message.payloads
    ]
    return out


def inspect_file(path: str | Path) -> dict[str, Any]:
    """Read ``path`` leniently, judge it strictly, and summarise both.

    The verdict is ``valid`` when strict parsing accepts the message, ``accepted-with-warnings`` when only
    lenient parsing does, and ``rejected`` when neither does.
    """
    result: dict[str, Any] = {"file": str(path)}
    try:
        message = read_message_file(path, mode=ParseMode.LENIENT)
    except EbmsError as exc:
        result["verdict"] = "rejected"
        result["errors"] = [_issue(i) for i in exc.issues]
        return result
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
        result["strict_errors"] = [_issue(i) for i in exc.issues]
    else:
        result["verdict"] = "valid"
    return result


def render_text(result: dict[str, Any]) -> str:
    """A human-readable rendering of :func:`inspect_file`'s result."""
    lines = [f"{result['file']}", f"  verdict: {result['verdict']}"]
    if "kind" in result:
        lines.append(f"  kind: {result['kind']}  ({result['content_type']})")
    mh = result.get("message_header")
    if mh:

        def party(p: dict[str, Any]) -> str:
            ids = ", ".join(f"{i['value']} (type {i['type']})" if i["type"] else i["value"] for i in p["party_ids"])
            return ids + (f", role {p['role']}" if p["role"] else "")

        lines += [
            f"  from: {party(mh['from'])}",
            f"  to: {party(mh['to'])}",
            f"  cpa: {mh['cpa_id']}   conversation: {mh['conversation_id']}",
            f"  service: {mh['service']['value']}"
            + (f" (type {mh['service']['type']})" if mh["service"]["type"] else "")
            + f"   action: {mh['action']}",
            f"  message id: {mh['message_id']}   timestamp: {mh['timestamp']}",
        ]
        if mh["ref_to_message_id"]:
            lines.append(f"  in reply to: {mh['ref_to_message_id']}")
        if mh["time_to_live"]:
            lines.append(f"  time to live: {mh['time_to_live']}")
        flags = []
        if mh["duplicate_elimination"]:
            flags.append("DuplicateElimination")
        for a in result["ack_requested"]:
            flags.append(f"AckRequested({a['actor'] or 'toPartyMSH'}, signed={str(a['signed']).lower()})")
        if result["sync_reply"]:
            flags.append("SyncReply")
        if result["message_order"]:
            flags.append(f"MessageOrder({result['message_order']['sequence_number']})")
        if result["signed"]:
            flags.append("ds:Signature")
        if flags:
            lines.append("  reliability/security: " + ", ".join(flags))
    for ack in result.get("acknowledgments", []):
        lines.append(f"  acknowledges: {ack['ref_to_message_id']} at {ack['timestamp']}")
    if "error_list" in result:
        lines.append(f"  error list (highest severity {result['error_list']['highest_severity']}):")
        for e in result["error_list"]["errors"]:
            lines.append(f"    {e['severity']} {e['errorCode']} at {e['location'] or '-'}: {e['description'] or ''}")
    if "fault" in result:
        lines.append(f"  SOAP Fault {result['fault']['faultcode']}: {result['fault']['faultstring']}")
    for ref in result.get("manifest", []):
        lines.append(f"  manifest: {ref['href']}")
    for p in result.get("payloads", []):
        lines.append(f"  payload: <{p['content_id']}> {p['content_type']} {p['size']} bytes")
    for key, title in (("errors", "errors"), ("strict_errors", "strict mode rejects it"), ("warnings", "warnings")):
        if result.get(key):
            lines.append(f"  {title}:")
            for i in result[key]:
                where = f" at {i['location']}" if i["location"] else ""
                lines.append(f"    {i['severity']} {i['errorCode']}{where}: {i['description']}")
    return "\n".join(lines)
