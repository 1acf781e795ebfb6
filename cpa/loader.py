"""Load a CPP/CPA 2.0 agreement file into the typed model of :mod:`cpa.model`.

:func:`load` reads an agreement and checks it in this order, raising one :class:`~cpa.errors.CpaError`
that lists every problem found at the first step that finds any:

1. the bytes parse as XML through the hardened parser (:func:`msh.safexml.parse_xml`: no DTD, no external
   entity, bounded size) and the root is a ``tp:CollaborationProtocolAgreement``;
2. the document is valid under the project's CPP/A 2.0 schema (``schemas/cpp-cpa-2_0.xsd``), judged by
   libxml2; when it is not, the ``xmlschema`` library explains each violation in readable words;
3. every IDREF names an element of the right kind (libxml2 does not check IDREF targets), every duration
   the MSH acts on (RetryInterval, PersistDuration) is usable (not negative, and the instants computed from
   it fall within the years 1 to 9999), every certificate decodes as X.509, every signing, digest and
   encryption algorithm is one of :data:`KNOWN_ALGORITHMS`, and the agreement's own signature, when it has
   one and it is filled in, verifies.

Durations are kept as written (:class:`~cpa.duration.XsDuration`): months and years are legal xs:duration
and load. A ``ds:Signature`` left as an unfilled template (empty SignatureValue or DigestValue, or a
KeyInfo with nothing in it), as tools leave in generated agreements, does not stop the agreement from
loading: it loads as unsigned, with a Warning in ``warnings``.

An agreement's Status and validity window are *not* checked here: an expired or merely proposed agreement
loads, and the registry and resolver decide whether it may be used.

This module reads the document (step 1) and runs the steps; the others live in their own modules:
unfilled signature templates and the agreement's signature in :mod:`cpa.signature`, the schema in
:mod:`cpa.schema` (with :mod:`msh.xsd`), the model and its checks in :mod:`cpa.builder`
(:mod:`cpa.references`, :mod:`cpa.algorithms`, :mod:`cpa.certificates`), problem paths and the cap on
their number in :mod:`cpa.document`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from lxml import etree

from cpa.algorithms import KNOWN_ALGORITHMS, AlgorithmUse
from cpa.builder import Builder
from cpa.document import MAX_PROBLEMS, TP
from cpa.errors import CpaError, CpaProblem
from cpa.model import CollaborationProtocolAgreement
from cpa.schema import SCHEMA_FILE, validate
from cpa.signature import set_aside_templates
from msh.errors import EnvelopeError
from msh.safexml import XmlLimits, parse_xml
from msh.xsd import source_line

__all__ = ["AGREEMENT_LIMITS", "KNOWN_ALGORITHMS", "MAX_PROBLEMS", "SCHEMA_FILE", "AlgorithmUse", "load"]

#: Bounds on an agreement document: an agreement with many actions has long lists of siblings (CanSend,
#: CanReceive, channels), so it may have more children per element than a message, and more nodes in all
#: (every element, comment and processing instruction, those before and after the root included).
AGREEMENT_LIMITS: Final = XmlLimits(max_children=4096, max_nodes=262_144)


def load(source: str | os.PathLike[str] | bytes, *, verify_signature: bool = True) -> CollaborationProtocolAgreement:
    """Load and check the CPP/CPA 2.0 agreement in ``source`` (a file path, or the document's bytes).

    Returns the agreement with every reference resolved (see :mod:`cpa.model`); its ``source`` is the
    file name as given, or ``"<bytes>"``. Durations become :class:`~cpa.duration.XsDuration`, months and
    years included; a RetryInterval or PersistDuration is refused only when the MSH cannot use it:
    negative, or so long that the instant it leads to from the agreement's End (PersistDuration; for
    RetryInterval, (Retries + 1) intervals) is past the year 9999. Start and End become timezone-aware
    datetimes, a value without a time zone being read as UTC (CPP/A 2.0 §9.4.2/§9.4.3 ask for UTC).

    When the agreement carries its own ``ds:Signature`` (in ``tp:Signature``), it is verified: it must be
    one enveloped signature over the whole document, made with a certificate that is in its ``ds:KeyInfo``
    and is also one of the parties' ``tp:Certificate`` elements; ``signed`` is then True. A signature left
    as an unfilled template (an empty SignatureValue or DigestValue, or a ds:KeyInfo with nothing in it) is
    not a signature: the agreement loads with ``signed`` False and a Warning in ``warnings``. With
    ``verify_signature=False`` a filled-in signature is not checked at all (and ``signed`` stays False):
    use it only for an agreement whose signature was checked some other way, or to inspect a broken one.

    Raises :class:`~cpa.errors.CpaError` listing every problem found (unreadable file, hostile or
    malformed XML, schema violations, dangling references, unusable durations, certificates or
    algorithms, a filled-in signature that does not verify), the warnings among them; an expired or
    unsigned agreement is not a load error.
    """
    if isinstance(source, bytes):
        name, data = "<bytes>", source
    else:
        name = os.fsdecode(source)
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise CpaError(
                [CpaProblem(name, None, "", f"cannot read the agreement: {reason}; check the path")]
            ) from exc
    root = _parse(name, data)
    _check_root(name, root)
    warnings = set_aside_templates(name, root)
    validate(name, root, warnings)
    return Builder(name, root, data, verify_signature, warnings).build()


# --------------------------------------------------------------------------------------------------
# Step 1: parsing
# --------------------------------------------------------------------------------------------------


def _parse(name: str, data: bytes) -> etree._Element:
    try:
        return parse_xml(data, what=f"agreement {name}", limits=AGREEMENT_LIMITS)
    except EnvelopeError as exc:
        cause = exc.__cause__
        if isinstance(cause, etree.XMLSyntaxError):
            line = cause.lineno if isinstance(cause.lineno, int) and cause.lineno > 0 else None
            message = f"not well-formed XML: {cause.msg}; fix the XML syntax there"
        elif "DTD" in exc.description:
            line = _line_of(data, (b"<!DOCTYPE", b"<!ENTITY"))
            message = (
                "the agreement declares a DTD or entities, which are refused (they can read local files or "
                "expand without bound); remove the <!DOCTYPE ...> declaration"
            )
        else:
            line = None
            detail = exc.description.removeprefix(f"agreement {name}: ").removeprefix(f"agreement {name} ")
            message = f"{detail}; check that this is the agreement file you meant"
        raise CpaError([CpaProblem(name, line, "", message)]) from exc


def _line_of(data: bytes, needles: tuple[bytes, ...]) -> int | None:
    positions = [p for p in (data.find(n) for n in needles) if p >= 0]
    return data.count(b"\n", 0, min(positions)) + 1 if positions else None


def _check_root(name: str, root: etree._Element) -> None:
    # CPP/A 2.0 §9.4: an agreement is a tp:CollaborationProtocolAgreement (a CPP is one party's offer).
    qname = etree.QName(root)
    if qname.namespace == TP and qname.localname == "CollaborationProtocolAgreement":
        return
    if qname.namespace == TP and qname.localname == "CollaborationProtocolProfile":
        message = (
            "this is a CollaborationProtocolProfile (one party's offer), not an agreement; the MSH needs the "
            "CollaborationProtocolAgreement the two parties formed from their profiles"
        )
    elif qname.localname == "CollaborationProtocolAgreement":
        message = (
            f"the agreement is in namespace '{qname.namespace}', not CPP/A 2.0's '{TP}'; "
            "convert it to CPP/A 2.0 (only CPP/A 2.0 agreements are supported)"
        )
    else:
        found = f"{{{qname.namespace}}}{qname.localname}" if qname.namespace else qname.localname
        message = (
            f"the root element is {found}, not tp:CollaborationProtocolAgreement ({TP}); "
            "check that this is an agreement file"
        )
    raise CpaError([CpaProblem(name, source_line(root), "/" + qname.localname, message)])
