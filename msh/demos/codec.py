"""The demo (``msh demo``): parse, validate and round-trip the sample messages and print a summary.

For every file in ``samples/messages`` it prints the verdict (valid / accepted-with-warnings / rejected),
and for every message that could be read it rebuilds the message from the model, parses the rebuilt bytes
in strict mode, and checks that the envelope and every payload byte came back unchanged. A rejected message
is answered the way the MSH would answer it: with an ebXML ErrorList message or, when the envelope could
not be read, with a SOAP Fault. The exit status is 0 when every round trip held.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from msh.ebms.errorlist import error_message, soap_fault
from msh.ebms.inspect import inspect_file
from msh.ebms.message import (
    EbxmlMessage,
    ParseMode,
    build_message,
    parse_message,
    read_message_file,
)
from msh.ebms.mime import AttachmentSpec
from msh.ebms.model import ReplyAddress
from msh.ebms.salvage import salvage_reply_address
from msh.errors import ConfigurationError, EbmsError, EnvelopeError

__all__ = ["round_trip", "run_demo"]

SAMPLES_PACKAGE = "msh.sample_messages"
"""The data package of the sample messages (the checkout's samples/messages, inside the wheel too)."""
MESSAGE_SUFFIXES = (".http", ".xml", ".mime")


def sample_folder() -> Path:
    """The folder of the installed sample messages (:mod:`importlib.resources`: a wheel, or a checkout
    installed with ``pip install -e .``); a checkout used without installing it, its samples/messages."""
    try:
        folder = resources.files(SAMPLES_PACKAGE)
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "samples" / "messages"
        if checkout.is_dir():
            return checkout
        raise ConfigurationError(
            f"the sample messages ({SAMPLES_PACKAGE}) are not installed; reinstall the MSH or pass --samples DIR"
        ) from None
    if not isinstance(folder, Path):
        raise ConfigurationError(f"the sample messages are inside an archive ({folder}); pass --samples DIR")
    return folder


def round_trip(message: EbxmlMessage) -> tuple[bool, str]:
    """Rebuild ``message`` from its model, parse the result strictly, and compare. Returns (ok, detail)."""
    attachments = [
        AttachmentSpec(p.content_id or f"part{i}", p.content_type, p.body, transfer_encoding="binary")
        for i, p in enumerate(message.payloads)
    ]
    content_type, body = build_message(message.envelope, attachments)
    again = parse_message(body, content_type, mode=ParseMode.STRICT)
    try:
        if again.envelope != message.envelope:
            return False, "envelope changed in the round trip"
        for before, after in zip(message.payloads, again.payloads, strict=True):
            if before.body.read_bytes() != after.body.read_bytes():
                return False, f"payload {before.content_id} changed in the round trip"
        return True, f"{len(body)} bytes rebuilt, strict-valid, identical"
    finally:
        again.close()


def _readable_header(path: Path) -> ReplyAddress | None:
    """Who to answer about a rejected message, when its MessageHeader can still be read (as the endpoint
    does, ebMS2 §4.2.4.2)."""
    return salvage_reply_address(path.read_bytes())


def run_demo(samples: str | None = None) -> int:
    """Run the demo over ``samples`` (default: the project's samples/messages). Returns the exit status."""
    folder = Path(samples) if samples else sample_folder()
    # Every file of a folder given; of the data package, its messages (not its __init__.py).
    every = samples is not None
    files = (
        sorted(p for p in folder.iterdir() if p.is_file() and (every or p.suffix in MESSAGE_SUFFIXES))
        if folder.is_dir()
        else []
    )
    if not files:
        print(f"no sample messages found in {folder}; run scripts/make_samples.py or pass --samples DIR")
        return 1
    print(f"ebXML MSH demo: {len(files)} sample messages from {folder}\n")
    counts = {"valid": 0, "accepted-with-warnings": 0, "rejected": 0, "round-trips": 0, "failures": 0}
    started = time.perf_counter()
    for path in files:
        result = inspect_file(path)
        verdict = result["verdict"]
        counts[verdict] = counts.get(verdict, 0) + 1
        kind = result.get("kind", "-")
        print(f"{path.name:<24} {verdict:<23} {kind}")
        for w in result.get("warnings", []):
            print(f"    warning {w['errorCode']} at {w['location'] or '-'}: {w['description']}")
        if verdict == "rejected":
            try:
                read_message_file(path, mode=ParseMode.LENIENT).close()
            except EnvelopeError as exc:
                fault = soap_fault(exc)
                assert fault.fault is not None
                print(f"    answered with a SOAP Fault: {fault.fault.faultcode} {fault.fault.faultstring}")
            except EbmsError as exc:
                header = _readable_header(path)
                if header is None:
                    print(f"    answered with a SOAP Fault: {exc}")
                else:
                    reply = error_message(
                        exc, in_reply_to=header, message_id=f"error-{header.message_id}", timestamp=datetime.now(UTC)
                    )
                    _, body = build_message(reply)
                    print(f"    answered with an ErrorList message ({len(body)} bytes): {exc}")
            continue
        message = read_message_file(path, mode=ParseMode.LENIENT)
        try:
            ok, detail = round_trip(message)
        finally:
            message.close()
        counts["round-trips" if ok else "failures"] += 1
        print(f"    round trip: {'ok' if ok else 'FAILED'} ({detail})")
    elapsed = time.perf_counter() - started
    print(
        f"\nsummary: {counts['valid']} valid, {counts['accepted-with-warnings']} accepted with warnings, "
        f"{counts['rejected']} rejected cleanly; {counts['round-trips']} round trips identical, "
        f"{counts['failures']} failed; {elapsed * 1000:.0f} ms"
    )
    return 0 if counts["failures"] == 0 else 1
