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
"""

from __future__ import annotations

import base64
import binascii
import itertools
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timezone
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Protocol, cast

from cryptography import x509
from elementpath.datatypes import DateTime
from lxml import etree

from cpa.duration import XsDuration
from cpa.errors import CpaError, CpaProblem
from cpa.model import (
    CPPA_NS,
    AccessAuthentication,
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    CollaborationRole,
    CompositePart,
    ConversationConstraints,
    DeliveryChannel,
    DigitalEnvelope,
    DocExchange,
    EbxmlBinding,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    MessagingCharacteristics,
    NonRepudiation,
    Packaging,
    PartyId,
    PartyInfo,
    PerMessage,
    ReliableMessaging,
    SecurityDetails,
    ServiceBinding,
    SimplePart,
    Status,
    SyncReplyMode,
    Transport,
    TransportReceiver,
    TransportSecurity,
    TransportSender,
)
from msh.errors import ConfigurationError, EnvelopeError, Severity
from msh.resources import schema_path
from msh.safexml import XmlLimits, parse_xml
from msh.xmlpath import Locator

if TYPE_CHECKING:
    import xmlschema

__all__ = ["KNOWN_ALGORITHMS", "SCHEMA_FILE", "AlgorithmUse", "load"]

#: Problems reported per agreement at most (a last one says how many more there were): a few hundred
#: errors all say the same (fix the first), and listing thousands would cost more than the load itself.
MAX_PROBLEMS: Final = 100
_EXPLAIN_AT_MOST: Final = 25

#: Bounds on an agreement document: an agreement with many actions has long lists of siblings (CanSend,
#: CanReceive, channels), so it may have more children per element than a message.
AGREEMENT_LIMITS: Final = XmlLimits(max_children=4096)

#: The project's CPP/A 2.0 schema, in ``schemas/``.
SCHEMA_FILE: Final = "cpp-cpa-2_0.xsd"

TP: Final = CPPA_NS
DS: Final = "http://www.w3.org/2000/09/xmldsig#"
XLINK: Final = "http://www.w3.org/1999/xlink"
_NS: Final = {"tp": TP, "ds": DS}
_PREFIXES: Final = {TP: "tp", DS: "ds", XLINK: "xlink"}

_DSIG: Final = "http://www.w3.org/2000/09/xmldsig#"
_DSIG_MORE: Final = "http://www.w3.org/2001/04/xmldsig-more#"
_XMLENC: Final = "http://www.w3.org/2001/04/xmlenc#"
_XMLENC11: Final = "http://www.w3.org/2009/xmlenc11#"


class AlgorithmUse(StrEnum):
    """What an algorithm URI of :data:`KNOWN_ALGORITHMS` is for."""

    SIGNATURE = "signature"  # NonRepudiation/SignatureAlgorithm
    DIGEST = "digest"  # NonRepudiation/HashFunction
    ENCRYPTION = "encryption"  # DigitalEnvelope/EncryptionAlgorithm


# CPP/A 2.0 §8.4.40/§8.4.44: SignatureAlgorithm, HashFunction and EncryptionAlgorithm name XML Signature
# (RFC 3275, RFC 6931) and XML Encryption (1.0 and 1.1) algorithm URIs; these are the ones accepted.
KNOWN_ALGORITHMS: Final[Mapping[str, AlgorithmUse]] = MappingProxyType(
    {
        f"{_DSIG}rsa-sha1": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha256": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha384": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha512": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha256": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha384": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha512": AlgorithmUse.SIGNATURE,
        f"{_DSIG}sha1": AlgorithmUse.DIGEST,
        f"{_XMLENC}sha256": AlgorithmUse.DIGEST,
        f"{_DSIG_MORE}sha384": AlgorithmUse.DIGEST,
        f"{_XMLENC}sha512": AlgorithmUse.DIGEST,
        f"{_XMLENC}aes128-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}aes192-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}aes256-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}tripledes-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC11}aes128-gcm": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC11}aes256-gcm": AlgorithmUse.ENCRYPTION,
    }
)

# The elements whose xs:ID attribute other elements refer to (CPP/A 2.0 IDs are document-wide), by the
# local name of the element and of its ID attribute.
_ID_ATTRIBUTES: Final = {
    "Certificate": "certId",
    "SecurityDetails": "securityId",
    "DeliveryChannel": "channelId",
    "Transport": "transportId",
    "DocExchange": "docExchangeId",
    "ThisPartyActionBinding": "id",
    "Packaging": "id",
    "SimplePart": "id",
    "Composite": "id",
    "Encapsulation": "id",
}

_SCHEMA_HINT: Final = f"correct it as the CPP/A 2.0 schema (schemas/{SCHEMA_FILE}) requires"
_CLARK: Final = re.compile(r"\{([^{}]*)\}([A-Za-z_][\w.\-]*)")
_LONG_QUOTED: Final = re.compile(r"'([^']{48})[^']{12,}'")
_XMLSCHEMA_ATTRIBUTE: Final = re.compile(r"^attribute '?(?:[\w.\-]+:|\{[^{}]*\})?([\w.\-]+)(?:'|=)")


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
    warnings = _set_aside_templates(name, root)
    _validate(name, root, warnings)
    return _Builder(name, root, data, verify_signature, warnings).build()


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
    raise CpaError([CpaProblem(name, _line(root), "/" + qname.localname, message)])


# --------------------------------------------------------------------------------------------------
# Signature templates (before the schema: a template is not a signature, and is often not schema-valid)
# --------------------------------------------------------------------------------------------------


def _unfilled(signature: etree._Element) -> str | None:
    """What makes ``signature`` an unfilled template (a ds:Signature as tools generate it before signing),
    or None for a filled-in signature: an empty or missing SignatureValue, an empty or missing DigestValue,
    or a ds:KeyInfo with nothing in it (no text and no attribute in any of its elements)."""
    value = signature.find("ds:SignatureValue", _NS)
    if value is None or not _text(value):
        return "its SignatureValue is empty"
    references = signature.findall("ds:SignedInfo/ds:Reference", _NS)
    if any(not _text(r.find("ds:DigestValue", _NS)) for r in references):
        return "a DigestValue is empty"
    key_info = signature.find("ds:KeyInfo", _NS)
    if key_info is None:
        return None
    if not any(str(t).strip() for t in key_info.itertext()) and not any(e.attrib for e in key_info.iterdescendants()):
        return "its KeyInfo is empty"
    return None


def _set_aside_templates(name: str, root: etree._Element) -> list[CpaProblem]:
    """Remove every unfilled ds:Signature template from ``root`` (and a tp:Signature left with none), with a
    Warning for each: the agreement then loads as unsigned unless a filled-in signature remains."""
    warnings: list[CpaProblem] = []
    locator = Locator()
    for holder in root.findall("tp:Signature", _NS):
        signatures = holder.findall("ds:Signature", _NS)
        for signature in signatures:
            reason = _unfilled(signature)
            if reason is None:
                continue
            # XML-DSig §3.2: core validation needs the DigestValues, the SignatureValue and a key: no signature.
            warnings.append(
                CpaProblem(
                    name,
                    _line(signature),
                    _path(signature, locator),
                    f"the agreement's ds:Signature is an unfilled template ({reason}), so the agreement is loaded "
                    "as unsigned; have it signed, or remove the tp:Signature element if it is not meant to be signed",
                    Severity.WARNING,
                )
            )
            holder.remove(signature)
        if signatures and not holder.findall("ds:Signature", _NS):
            root.remove(holder)
    return warnings


# --------------------------------------------------------------------------------------------------
# Step 2: schema validation
# --------------------------------------------------------------------------------------------------


class _LogEntry(Protocol):
    """What is read from an lxml error-log entry."""

    @property
    def message(self) -> str: ...

    @property
    def path(self) -> str | None: ...

    @property
    def line(self) -> int: ...


_lxml_local = threading.local()
_xmlschema_lock = threading.Lock()
_xmlschema_cache: list[xmlschema.XMLSchemaBase] = []


def _lxml_schema() -> etree.XMLSchema:
    """This thread's compiled schema (an lxml validator must not be shared between threads)."""
    schema: etree.XMLSchema | None = getattr(_lxml_local, "schema", None)
    if schema is None:
        path = schema_path(SCHEMA_FILE)
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        try:
            schema = etree.XMLSchema(etree.parse(str(path), parser))
        except (etree.XMLSchemaParseError, etree.XMLSyntaxError, OSError) as exc:
            raise ConfigurationError(
                f"the CPP/A schema {path} cannot be compiled: {exc}; restore it from the source checkout"
            ) from exc
        _lxml_local.schema = schema
    return schema


def _xmlschema_schema() -> xmlschema.XMLSchemaBase:
    """The schema as an ``xmlschema`` object, built on first use and shared (guarded by a lock)."""
    with _xmlschema_lock:
        if not _xmlschema_cache:
            import xmlschema

            path = schema_path(SCHEMA_FILE)
            try:
                schema = xmlschema.XMLSchema10(str(path), allow="local", defuse="always")
            except (xmlschema.XMLSchemaException, OSError) as exc:
                raise ConfigurationError(
                    f"the CPP/A schema {path} cannot be compiled: {exc}; restore it from the source checkout"
                ) from exc
            _xmlschema_cache.append(schema)
        return _xmlschema_cache[0]


def _validate(name: str, root: etree._Element, warnings: list[CpaProblem]) -> None:
    schema = _lxml_schema()
    if schema.validate(root):
        return
    log = cast("list[_LogEntry]", list(cast("Iterable[object]", schema.error_log)))
    # xmlschema explains in readable words but costs far more per error: past a few, libxml2's words do.
    problems = _explain(name, root) if len(log) <= _EXPLAIN_AT_MOST else []
    if not problems:  # xmlschema is more lenient here than libxml2: report libxml2's findings
        problems = [
            CpaProblem(
                name,
                entry.line or None,
                _strip_prefixes(entry.path or ""),
                f"not valid under the schema: {_tidy(entry.message)}; {_SCHEMA_HINT}",
            )
            for entry in log[: MAX_PROBLEMS + 1]
        ] or [CpaProblem(name, None, "", f"the document is not valid under the schema; {_SCHEMA_HINT}")]
    raise CpaError(_capped([*problems, *warnings]))


def _explain(name: str, root: etree._Element) -> list[CpaProblem]:
    """Readable problems from ``xmlschema``'s ``iter_errors``, pointing at the offending element."""
    schema = _xmlschema_schema()
    with _xmlschema_lock:  # xmlschema makes no thread-safety promise for validation
        try:
            errors = list(
                itertools.islice(schema.iter_errors(root, namespaces=dict(_NS, xlink=XLINK)), MAX_PROBLEMS + 1)
            )
        except Exception:  # e.g. elementpath's OverflowError on an absurd xs:duration: libxml2's words will do
            return []
    problems: list[CpaProblem] = []
    locator = Locator()
    for error in errors:
        reason = error.reason or error.message
        if reason.startswith("IDREF ") and "not found" in reason:
            # A dangling reference is reported by the reference check, with its element and line, once the
            # schema problems are fixed; xmlschema only names the document root.
            continue
        child = error.invalid_child
        elem = child if isinstance(child, etree._Element) else error.elem
        if isinstance(elem, etree._Element):
            path, line = _path(elem, locator), _line(elem)
        else:
            path, line = _strip_prefixes(error.path or ""), None
        attribute = _XMLSCHEMA_ATTRIBUTE.search(reason)
        if attribute is not None:
            path += f"/@{attribute.group(1)}"
        if isinstance(elem, etree._Element) and elem.tag == f"{{{DS}}}X509Certificate":
            problems.append(CpaProblem(name, line, path, _bad_base64_message(elem)))
            continue
        hint = _SCHEMA_HINT
        if "expected" in reason and "Tag '" in reason:
            hint = f"add the expected element there or put the elements in the right order: {_SCHEMA_HINT}"
        problems.append(CpaProblem(name, line, path, f"not valid under the schema: {_tidy(reason)}; {hint}"))
    return problems


def _bad_base64_message(node: etree._Element, detail: str = "") -> str:
    """What to say about a ds:X509Certificate whose text is not base64 (found by the schema or by us)."""
    certificate = next(node.iterancestors(_q("Certificate")), None)
    cert_id = (_attr(certificate, "certId") or "") if certificate is not None else ""
    return (
        f"Certificate '{cert_id}': ds:X509Certificate is not valid base64{detail}; put the certificate's base64 "
        "(DER) text in it, without the PEM '-----BEGIN CERTIFICATE-----' lines"
    )


def _tidy(message: str) -> str:
    text = _CLARK.sub(lambda m: f"{_PREFIXES.get(m.group(1), m.group(1))}:{m.group(2)}", message.strip())
    text = _LONG_QUOTED.sub(lambda m: f"'{m.group(1)}...'", text)
    return text.rstrip(".")


def _strip_prefixes(path: str) -> str:
    return "/".join(step.split(":", 1)[-1] for step in path.split("/"))


# --------------------------------------------------------------------------------------------------
# Step 3: the model, with every reference resolved
# --------------------------------------------------------------------------------------------------


def _q(local: str) -> str:
    return f"{{{TP}}}{local}"


def _local(element: etree._Element) -> str:
    return etree.QName(element).localname


def _line(element: etree._Element) -> int | None:
    line: object = element.sourceline
    return line if isinstance(line, int) else None


def _path(element: etree._Element, locator: Locator) -> str:
    """``/CollaborationProtocolAgreement/PartyInfo[1]/DeliveryChannel[2]``: local names, with a position
    where same-named siblings make one necessary (:class:`msh.xmlpath.Locator`: each parent's children are
    scanned once, however many problems there are)."""
    return "/" + "/".join(locator.steps(element))


def _capped(problems: list[CpaProblem]) -> list[CpaProblem]:
    """At most :data:`MAX_PROBLEMS` problems, in document order, and a last one saying how many more."""
    ordered = sorted(problems, key=lambda p: p.line or 0)
    if len(ordered) <= MAX_PROBLEMS:
        return ordered
    rest = ordered[MAX_PROBLEMS:]
    more = CpaProblem(
        rest[0].source,
        rest[0].line,
        "",
        f"and {len(rest)} more problem(s) from here on, not listed (at most {MAX_PROBLEMS} are); fix these first",
    )
    return [*ordered[:MAX_PROBLEMS], more]


def _text(element: etree._Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""


def _attr(element: etree._Element, local: str) -> str | None:
    value = element.get(_q(local))
    return value.strip() if value is not None else None


def _child(element: etree._Element, local: str) -> etree._Element | None:
    return element.find(_q(local))


def _children(element: etree._Element, local: str) -> list[etree._Element]:
    return element.findall(_q(local))


class _Builder:
    """Builds the model of one schema-valid agreement, collecting every problem on the way.

    A builder method returns None when what it builds cannot be built; it has then recorded a problem,
    so :meth:`build` raises instead of returning a partial agreement.
    """

    def __init__(
        self, name: str, root: etree._Element, data: bytes, verify_signature: bool, warnings: list[CpaProblem]
    ) -> None:
        self.name = name
        self.root = root
        self.data = data
        self.verify_signature = verify_signature
        self.problems: list[CpaProblem] = []
        self.locator = Locator()
        self.ids: dict[str, list[etree._Element]] = {}
        for element in root.iter(*(_q(local) for local in _ID_ATTRIBUTES)):
            value = _attr(element, _ID_ATTRIBUTES[_local(element)])
            if value:
                self.ids.setdefault(value, []).append(element)
        self.certificates: dict[etree._Element, Certificate] = {}
        self.security: dict[etree._Element, SecurityDetails] = {}
        self.transports: dict[etree._Element, Transport] = {}
        self.doc_exchanges: dict[etree._Element, DocExchange] = {}
        self.channels: dict[etree._Element, DeliveryChannel] = {}
        # (element, label, text, duration, repeat) of each duration the MSH acts on: see check_spans.
        self.spans: list[tuple[etree._Element, str, str, XsDuration, int]] = []
        self.warnings = warnings

    # -- problems and references ------------------------------------------------------------------

    def problem(self, element: etree._Element, message: str, attribute: str | None = None) -> None:
        path = _path(element, self.locator) + (f"/@{attribute}" if attribute else "")
        self.problems.append(CpaProblem(self.name, _line(element), path, message))

    def resolve(
        self, ref: etree._Element, value: str | None, kind: str | tuple[str, ...], attribute: str | None
    ) -> etree._Element | None:
        """The ``kind`` element (or one of the ``kind`` elements) whose ID is ``value``, named by ``ref`` (in
        its ``attribute``, or as its text).

        CPP/A 2.0 IDs are document-wide (xs:ID); should a value be found twice, the element in the same
        PartyInfo as ``ref`` wins. A value naming nothing, or something else, is a problem.
        """
        # CPP/A 2.0 uses xs:ID / xs:IDREF: one document-wide name space, checked here (libxml2 does not).
        kinds = (kind,) if isinstance(kind, str) else kind
        label = f"{_local(ref)}@{attribute}" if attribute else _local(ref)
        id_attribute = _ID_ATTRIBUTES[kinds[0]]
        kind = " or ".join(kinds)
        if not value:
            self.problem(ref, f"{label} is empty; give the {id_attribute} of a {kind}", attribute)
            return None
        candidates = self.ids.get(value, [])
        matching = [c for c in candidates if _local(c) in kinds]
        if matching:
            party = self._party_of(ref)
            return next((c for c in matching if self._party_of(c) is party), matching[0])
        if candidates:
            message = (
                f"{label} '{value}' names a {_local(candidates[0])}, not a {kind}; "
                f"refer to the {id_attribute} of a {kind}"
            )
        else:
            message = (
                f"{label} '{value}' names no {kind}; define a {kind} with {id_attribute}=\"{value}\" "
                "or fix the reference"
            )
        self.problem(ref, message, attribute)
        return None

    def _party_of(self, element: etree._Element) -> etree._Element | None:
        for ancestor in element.iterancestors(_q("PartyInfo")):
            return ancestor
        return None

    def certificate_ref(self, ref: etree._Element | None) -> Certificate | None:
        """``ref`` (a ...CertificateRef element, CPP/A 2.0 §8.4.33) resolved through its certId."""
        if ref is None:
            return None
        target = self.resolve(ref, _attr(ref, "certId"), "Certificate", "certId")
        return self.certificates.get(target) if target is not None else None

    def security_ref(self, ref: etree._Element | None) -> SecurityDetails | None:
        """``ref`` (a ...SecurityDetailsRef element, CPP/A 2.0 §8.4.35) resolved through its securityId."""
        if ref is None:
            return None
        target = self.resolve(ref, _attr(ref, "securityId"), "SecurityDetails", "securityId")
        return self.security.get(target) if target is not None else None

    # -- values -----------------------------------------------------------------------------------

    def duration(
        self, element: etree._Element, text: str, label: str, attribute: str | None = None
    ) -> XsDuration | None:
        """An xs:duration (:meth:`XsDuration.parse`); a problem, labelled ``label``, if it is not one."""
        try:
            return XsDuration.parse(text)
        except ValueError as exc:
            self.problem(element, f"{label} {exc}", attribute)
            return None

    def wait(self, element: etree._Element, label: str, repeat: int | None = 1) -> XsDuration | None:
        """A duration the MSH acts on (RetryInterval, PersistDuration): any xs:duration, months included,
        but not negative. ``repeat`` times it, added to the agreement's End, must stay within the years 1 to
        9999 (checked by :meth:`check_spans` once End is known; None: not checked)."""
        text = _text(element)
        value = self.duration(element, text, label)
        if value is None:
            return None
        # ebMS2 §6.4.4, §6.4.6: the MSH waits RetryInterval and keeps retrying for PersistDuration: never negative.
        if value.is_negative:
            self.problem(element, f"{label} '{text}' is negative; give a positive duration")
            return None
        if repeat is not None:
            self.spans.append((element, label, text, value, repeat))
        return value

    def check_spans(self, end: datetime) -> None:
        """Refuse a RetryInterval or PersistDuration the MSH could not turn into an instant: a message first
        sent just before End is resent up to (Retries + 1) RetryIntervals later and kept PersistDuration."""
        for element, label, text, value, repeat in self.spans:
            try:
                # XML Schema Part 2 Appendix E: the instant is the duration added to the one it starts from.
                (value * repeat).add_to(end)
            except OverflowError:
                what = f"(Retries + 1) x {label} = {repeat} x '{text}'" if repeat > 1 else f"{label} '{text}'"
                self.problem(
                    element,
                    f"{label} '{text}' is too long to be used: {what} after the agreement's End "
                    f"({end.isoformat()}) is past the year 9999; give a shorter duration",
                )

    def date_time(self, element: etree._Element) -> datetime | None:
        """An xs:dateTime as an aware datetime; without a time zone it is read as UTC."""
        text = _text(element)
        try:
            value = DateTime.fromstring(text)
        except ValueError:
            self.problem(
                element, f"{_local(element)} '{text}' is not an xs:dateTime; write it like 2026-01-01T00:00:00Z"
            )
            return None
        if value.bce or not 1 <= value.year <= 9999:
            self.problem(element, f"{_local(element)} '{text}' is outside the years 1 to 9999; correct the date")
            return None
        # CPP/A 2.0 §9.4.2/§9.4.3: Start and End are in UTC; a value without a time zone is read so.
        offset = value.tzinfo.utcoffset(None) if value.tzinfo is not None else None
        tz = timezone(offset) if offset else UTC
        return datetime(
            value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, tzinfo=tz
        )

    def algorithm(self, element: etree._Element, use: AlgorithmUse) -> str | None:
        """The algorithm URI of ``element`` (its text, else its ``w3c`` attribute) if it is known for ``use``."""
        text, w3c = _text(element), _attr(element, "w3c")
        for candidate in (text, w3c):
            if candidate is not None and KNOWN_ALGORITHMS.get(candidate) is use:
                return candidate
        label = _local(element)
        other = KNOWN_ALGORITHMS.get(text) or (KNOWN_ALGORITHMS.get(w3c) if w3c else None)
        known = ", ".join(uri for uri, kind in KNOWN_ALGORITHMS.items() if kind is use)
        if other is not None:
            message = f"{label} '{text}' is a {other} algorithm, not a {use} algorithm; use one of: {known}"
        else:
            message = f"{label} '{text}' is not a known {use} algorithm URI; use one of: {known}"
        self.problem(element, message)
        return None

    # -- certificates and security details (CPP/A 2.0 §8.4.33-§8.4.35) ----------------------------

    def build_certificate(self, element: etree._Element) -> Certificate:
        cert_id = _attr(element, "certId") or ""
        ders: list[bytes] = []
        for node in element.iterfind("ds:KeyInfo/ds:X509Data/ds:X509Certificate", _NS):
            text = "".join((node.text or "").split())
            label = f"Certificate '{cert_id}': ds:X509Certificate"
            if not text:
                self.problem(node, f"{label} is empty; put the certificate's base64 (DER) text in it")
                continue
            try:
                der = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as exc:
                self.problem(node, _bad_base64_message(node, f" ({exc})"))
                continue
            try:
                x509.load_der_x509_certificate(der)
            except ValueError:
                self.problem(
                    node,
                    f"{label} is base64 but not a DER X.509 certificate; put the certificate's base64 (DER) text in it",
                )
                continue
            ders.append(der)
        return Certificate(cert_id, tuple(ders))

    def build_security_details(self, element: etree._Element) -> SecurityDetails:
        anchors = [
            self.certificate_ref(ref) for ref in element.iterfind("tp:TrustAnchors/tp:AnchorCertificateRef", _NS)
        ]
        return SecurityDetails(_attr(element, "securityId") or "", tuple(a for a in anchors if a is not None))

    # -- transports (CPP/A 2.0 §8.4.23-§8.4.31) ----------------------------------------------------

    def transport_security(
        self, element: etree._Element | None, cert_ref: str, peer_ref: str
    ) -> TransportSecurity | None:
        if element is None:
            return None
        protocol = _child(element, "TransportSecurityProtocol")
        return TransportSecurity(
            protocol=_text(protocol),
            protocol_version=_attr(protocol, "version") if protocol is not None else None,
            certificate=self.certificate_ref(_child(element, cert_ref)),
            peer_security=self.security_ref(_child(element, peer_ref)),
        )

    def access_authentication(self, element: etree._Element) -> AccessAuthentication | None:
        schemes = tuple(_text(e) for e in _children(element, "AccessAuthentication"))
        return AccessAuthentication(schemes) if schemes else None

    def build_transport(self, element: etree._Element) -> Transport:
        sender = receiver = None
        sender_el = _child(element, "TransportSender")
        if sender_el is not None:
            protocol = _child(sender_el, "TransportProtocol")
            sender = TransportSender(
                protocol=_text(protocol),
                protocol_version=_attr(protocol, "version") if protocol is not None else None,
                access_authentication=self.access_authentication(sender_el),
                client_security=self.transport_security(
                    _child(sender_el, "TransportClientSecurity"), "ClientCertificateRef", "ServerSecurityDetailsRef"
                ),
            )
        receiver_el = _child(element, "TransportReceiver")
        if receiver_el is not None:
            protocol = _child(receiver_el, "TransportProtocol")
            endpoints = tuple(
                Endpoint(_attr(e, "uri") or "", EndpointType(_attr(e, "type") or EndpointType.ALL_PURPOSE))
                for e in _children(receiver_el, "Endpoint")
            )
            receiver = TransportReceiver(
                protocol=_text(protocol),
                protocol_version=_attr(protocol, "version") if protocol is not None else None,
                endpoints=endpoints,
                access_authentication=self.access_authentication(receiver_el),
                server_security=self.transport_security(
                    _child(receiver_el, "TransportServerSecurity"), "ServerCertificateRef", "ClientSecurityDetailsRef"
                ),
            )
        return Transport(_attr(element, "transportId") or "", sender, receiver)

    # -- document exchange (CPP/A 2.0 §8.4.35-§8.4.50) ---------------------------------------------

    def reliable_messaging(self, element: etree._Element | None) -> ReliableMessaging | None:
        if element is None:
            return None
        retries_el, interval_el = _child(element, "Retries"), _child(element, "RetryInterval")
        retries = interval = None
        # DESIGN.md §4: Retries and RetryInterval have no header form; the MSH takes them from the CPA only.
        if retries_el is None:
            self.problem(element, "ReliableMessaging has no Retries; add one, e.g. <tp:Retries>3</tp:Retries>")
        else:
            retries = int(_text(retries_el))
            if retries < 0:
                self.problem(retries_el, f"Retries is {retries}; give 0 or more")
                retries = None
        if interval_el is None:
            self.problem(
                element,
                "ReliableMessaging has no RetryInterval; add one, e.g. <tp:RetryInterval>PT30S</tp:RetryInterval>",
            )
        else:
            # ebMS2 §6.4.5: a message is resent up to Retries times, RetryInterval apart.
            interval = self.wait(interval_el, "RetryInterval", None if retries is None else retries + 1)
        order = MessageOrderSemantics(_text(_child(element, "MessageOrderSemantics")))
        if retries is None or interval is None:
            return None
        return ReliableMessaging(retries, interval, order)

    def non_repudiation(self, element: etree._Element | None) -> NonRepudiation | None:
        if element is None:
            return None
        protocol = _text(_child(element, "NonRepudiationProtocol"))
        hash_el = _child(element, "HashFunction")
        hash_function = self.algorithm(hash_el, AlgorithmUse.DIGEST) if hash_el is not None else None
        algorithm_els = _children(element, "SignatureAlgorithm")
        algorithms = [self.algorithm(e, AlgorithmUse.SIGNATURE) for e in algorithm_els]
        certificate = self.certificate_ref(_child(element, "SigningCertificateRef"))
        security = self.security_ref(_child(element, "SigningSecurityDetailsRef"))
        # CPP/A 2.0 §8.4.40: of several SignatureAlgorithm elements the first is used; all must be known.
        signature_algorithm = algorithms[0] if algorithms else None
        if hash_function is None or signature_algorithm is None or None in algorithms:
            return None
        return NonRepudiation(
            protocol=protocol,
            hash_function=hash_function,
            signature_algorithm=signature_algorithm,
            signature_algorithm_oid=_attr(algorithm_els[0], "oid"),
            certificate=certificate,
            security_details=security,
        )

    def digital_envelope(self, element: etree._Element | None) -> DigitalEnvelope | None:
        if element is None:
            return None
        protocol = _child(element, "DigitalEnvelopeProtocol")
        algorithms = [self.algorithm(e, AlgorithmUse.ENCRYPTION) for e in _children(element, "EncryptionAlgorithm")]
        certificate = self.certificate_ref(_child(element, "EncryptionCertificateRef"))
        security = self.security_ref(_child(element, "EncryptionSecurityDetailsRef"))
        encryption_algorithm = algorithms[0] if algorithms else None
        if encryption_algorithm is None or None in algorithms:
            return None
        return DigitalEnvelope(
            protocol=_text(protocol),
            protocol_version=_attr(protocol, "version") if protocol is not None else None,
            encryption_algorithm=encryption_algorithm,
            certificate=certificate,
            security_details=security,
        )

    def binding(self, element: etree._Element | None, side: str) -> EbxmlBinding | None:
        """ebXMLSenderBinding (``side`` = "Sender") or ebXMLReceiverBinding (``side`` = "Receiver")."""
        if element is None:
            return None
        rm_el = _child(element, "ReliableMessaging")
        reliable = self.reliable_messaging(rm_el)
        persist_el = _child(element, "PersistDuration")
        persist = self.wait(persist_el, "PersistDuration") if persist_el is not None else None
        nr_el = _child(element, f"{side}NonRepudiation")
        non_repudiation = self.non_repudiation(nr_el)
        de_el = _child(element, f"{side}DigitalEnvelope")
        envelope = self.digital_envelope(de_el)
        if (
            (rm_el is not None and reliable is None)
            or (persist_el is not None and persist is None)
            or (nr_el is not None and non_repudiation is None)
            or (de_el is not None and envelope is None)
        ):
            return None
        return EbxmlBinding(
            version=_attr(element, "version") or "",
            reliable_messaging=reliable,
            persist_duration=persist,
            non_repudiation=non_repudiation,
            digital_envelope=envelope,
            namespaces_supported=tuple(_text(e) for e in _children(element, "NamespaceSupported")),
        )

    def build_doc_exchange(self, element: etree._Element) -> DocExchange | None:
        sender_el, receiver_el = _child(element, "ebXMLSenderBinding"), _child(element, "ebXMLReceiverBinding")
        sender, receiver = self.binding(sender_el, "Sender"), self.binding(receiver_el, "Receiver")
        if (sender_el is not None and sender is None) or (receiver_el is not None and receiver is None):
            return None
        return DocExchange(_attr(element, "docExchangeId") or "", sender, receiver)

    # -- delivery channels (CPP/A 2.0 §8.4.7-§8.4.8) -----------------------------------------------

    def build_channel(self, element: etree._Element) -> DeliveryChannel | None:
        transport_el = self.resolve(element, _attr(element, "transportId"), "Transport", "transportId")
        exchange_el = self.resolve(element, _attr(element, "docExchangeId"), "DocExchange", "docExchangeId")
        transport = self.transports.get(transport_el) if transport_el is not None else None
        exchange = self.doc_exchanges.get(exchange_el) if exchange_el is not None else None
        mc = _child(element, "MessagingCharacteristics")
        characteristics = MessagingCharacteristics()
        if mc is not None:
            characteristics = MessagingCharacteristics(
                sync_reply_mode=SyncReplyMode(_attr(mc, "syncReplyMode") or SyncReplyMode.NONE),
                ack_requested=PerMessage(_attr(mc, "ackRequested") or PerMessage.PER_MESSAGE),
                ack_signature_requested=PerMessage(_attr(mc, "ackSignatureRequested") or PerMessage.PER_MESSAGE),
                duplicate_elimination=PerMessage(_attr(mc, "duplicateElimination") or PerMessage.PER_MESSAGE),
                actor=_attr(mc, "actor"),
            )
        if transport is None or exchange is None:
            return None
        return DeliveryChannel(_attr(element, "channelId") or "", transport, exchange, characteristics)

    # -- roles and action bindings (CPP/A 2.0 §8.4.4-§8.4.15) -------------------------------------

    def action_binding(self, element: etree._Element) -> ActionBinding | None:
        """ThisPartyActionBinding, with its OtherPartyActionBinding checked (CPP/A 2.0 §8.4.15)."""
        package_id = _attr(element, "packageId") or ""
        self.resolve(element, package_id, "Packaging", "packageId")
        other = element.getnext()
        if other is not None and other.tag == _q("OtherPartyActionBinding"):
            self.resolve(other, _text(other), "ThisPartyActionBinding", None)
        characteristics: list[tuple[str, str]] = []
        btc = _child(element, "BusinessTransactionCharacteristics")
        if btc is not None:
            for key, raw in btc.attrib.items():
                local, value = etree.QName(key).localname, str(raw).strip()
                if local.startswith("timeTo"):  # xs:duration attributes, kept as written (the MSH does not act on them)
                    self.duration(btc, value, f"BusinessTransactionCharacteristics@{local}", local)
                characteristics.append((local, value))
        channels: list[DeliveryChannel | None] = []
        for ref in _children(element, "ChannelId"):
            target = self.resolve(ref, _text(ref), "DeliveryChannel", None)
            channels.append(self.channels.get(target) if target is not None else None)
        if any(c is None for c in channels):
            return None
        return ActionBinding(
            id=_attr(element, "id") or "",
            action=_attr(element, "action") or "",
            package_id=package_id,
            channels=tuple(c for c in channels if c is not None),
            business_transaction_characteristics=tuple(characteristics),
        )

    def _walk_bindings(self, element: etree._Element) -> Iterator[tuple[str, etree._Element]]:
        """(direction, ThisPartyActionBinding) for every CanSend/CanReceive under ``element``, nested
        ones included (CPP/A 2.0 §8.4.11: a CanReceive inside a CanSend is a reply bound to it)."""
        for child in element:
            if child.tag in (_q("CanSend"), _q("CanReceive")):
                binding = _child(child, "ThisPartyActionBinding")
                if binding is not None:
                    yield _local(child), binding
                yield from self._walk_bindings(child)

    def collaboration_role(self, element: etree._Element) -> CollaborationRole | None:
        process = _child(element, "ProcessSpecification")
        role = _child(element, "Role")
        for ref in _children(element, "ApplicationCertificateRef"):
            self.certificate_ref(ref)
        self.security_ref(_child(element, "ApplicationSecurityDetailsRef"))
        binding_el = _child(element, "ServiceBinding")
        if process is None or role is None or binding_el is None:
            return None  # the schema requires all three
        service = _child(binding_el, "Service")
        sends: list[ActionBinding | None] = []
        receives: list[ActionBinding | None] = []
        for direction, binding in self._walk_bindings(binding_el):
            (sends if direction == "CanSend" else receives).append(self.action_binding(binding))
        return CollaborationRole(
            process_specification=_attr(process, "name") or "",
            process_specification_version=_attr(process, "version"),
            role=_attr(role, "name") or "",
            service_binding=ServiceBinding(
                service=_text(service),
                service_type=_attr(service, "type") if service is not None else None,
                can_send=tuple(b for b in sends if b is not None),
                can_receive=tuple(b for b in receives if b is not None),
            ),
            role_href=role.get(f"{{{XLINK}}}href"),
        )

    # -- the agreement (CPP/A 2.0 §8.4.1, §9.4) ----------------------------------------------------

    def party_info(self, element: etree._Element) -> PartyInfo | None:
        roles = [self.collaboration_role(e) for e in _children(element, "CollaborationRole")]
        for override in _children(element, "OverrideMshActionBinding"):
            self.resolve(override, _attr(override, "channelId"), "DeliveryChannel", "channelId")
        package_id = _attr(element, "defaultMshPackageId") or ""
        self.resolve(element, package_id, "Packaging", "defaultMshPackageId")
        default_el = self.resolve(
            element, _attr(element, "defaultMshChannelId"), "DeliveryChannel", "defaultMshChannelId"
        )
        default = self.channels.get(default_el) if default_el is not None else None
        if default is None:
            return None
        return PartyInfo(
            party_name=_attr(element, "partyName") or "",
            party_ids=tuple(PartyId(_text(e), _attr(e, "type")) for e in _children(element, "PartyId")),
            collaboration_roles=tuple(r for r in roles if r is not None),
            certificates=tuple(self.certificates[e] for e in _children(element, "Certificate")),
            security_details=tuple(self.security[e] for e in _children(element, "SecurityDetails")),
            delivery_channels=tuple(
                self.channels[e] for e in _children(element, "DeliveryChannel") if e in self.channels
            ),
            default_msh_channel=default,
            default_msh_package_id=package_id,
        )

    def build_packaging(self, element: etree._Element) -> Packaging:
        # CPP/A 2.0 §8.5: ProcessingCapabilities, SimplePart*, CompositeList*.
        capabilities = _child(element, "ProcessingCapabilities")
        parse = generate = False
        if capabilities is not None:
            parse = (_attr(capabilities, "parse") or "").strip() in ("true", "1")
            generate = (_attr(capabilities, "generate") or "").strip() in ("true", "1")
        composites = tuple(
            CompositePart(
                id=_attr(part, "id") or "",
                mime_type=_attr(part, "mimetype") or "",
                constituents=tuple(_attr(c, "idref") or "" for c in _children(part, "Constituent")),
                encapsulation=etree.QName(part).localname == "Encapsulation",
            )
            for composite_list in _children(element, "CompositeList")
            for part in composite_list
            if isinstance(part.tag, str) and etree.QName(part).localname in ("Composite", "Encapsulation")
        )
        return Packaging(id=_attr(element, "id") or "", parse=parse, generate=generate, composites=composites)

    def build_simple_part(self, part: etree._Element) -> SimplePart:
        # CPP/A 2.0 §8.5.3: a SimplePart is declared once per agreement and named by Constituent@idref.
        return SimplePart(
            id=_attr(part, "id") or "",
            mime_type=_attr(part, "mimetype") or "",
            mime_parameters=_attr(part, "mimeparameters"),
            namespaces_supported=tuple(_text(ns) for ns in _children(part, "NamespaceSupported")),
        )

    def build(self) -> CollaborationProtocolAgreement:
        root = self.root
        for element in root.iterfind("tp:PartyInfo/tp:Certificate", _NS):
            self.certificates[element] = self.build_certificate(element)
        for element in root.iterfind("tp:PartyInfo/tp:SecurityDetails", _NS):
            self.security[element] = self.build_security_details(element)
        for element in root.iterfind("tp:PartyInfo/tp:Transport", _NS):
            self.transports[element] = self.build_transport(element)
        for element in root.iterfind("tp:PartyInfo/tp:DocExchange", _NS):
            exchange = self.build_doc_exchange(element)
            if exchange is not None:
                self.doc_exchanges[element] = exchange
        for element in root.iterfind("tp:PartyInfo/tp:DeliveryChannel", _NS):
            channel = self.build_channel(element)
            if channel is not None:
                self.channels[element] = channel
        parties = [self.party_info(e) for e in _children(root, "PartyInfo")]
        for constituent in root.iterfind(".//tp:Constituent", _NS):
            self.resolve(
                constituent, _attr(constituent, "idref"), ("SimplePart", "Composite", "Encapsulation"), "idref"
            )
        simple_parts = tuple(self.build_simple_part(e) for e in _children(root, "SimplePart"))
        packagings = tuple(self.build_packaging(e) for e in _children(root, "Packaging"))
        status_el, start_el, end_el = _child(root, "Status"), _child(root, "Start"), _child(root, "End")
        start = self.date_time(start_el) if start_el is not None else None
        end = self.date_time(end_el) if end_el is not None else None
        if end is not None:
            self.check_spans(end)
        signed = self.check_signature()
        if self.problems:
            # in document order, the warnings with them
            raise CpaError(_capped([*self.problems, *self.warnings]))
        assert start is not None and end is not None  # else a problem was recorded (or the schema refused)
        first, second = parties  # the schema wants exactly two
        assert first is not None and second is not None  # else a problem was recorded
        constraints = None
        cc = _child(root, "ConversationConstraints")
        if cc is not None:
            limit, concurrent = _attr(cc, "invocationLimit"), _attr(cc, "concurrentConversations")
            constraints = ConversationConstraints(
                invocation_limit=int(limit) if limit is not None else None,
                concurrent_conversations=int(concurrent) if concurrent is not None else None,
            )
        return CollaborationProtocolAgreement(
            cpaid=_attr(root, "cpaid") or "",
            version=_attr(root, "version"),
            status=Status((_attr(status_el, "value") if status_el is not None else None) or ""),
            start=start,
            end=end,
            party_infos=(first, second),
            conversation_constraints=constraints,
            signed=signed,
            source=self.name,
            simple_parts=simple_parts,
            packagings=packagings,
            warnings=tuple(self.warnings),
        )

    # -- the agreement's own signature (CPP/A 2.0 §9, Signature element; XML-DSig enveloped) -----------

    def check_signature(self) -> bool:
        """Verify the agreement's ds:Signature, if any; True when one was present and verified (unfilled
        templates were set aside before, see :func:`_set_aside_templates`)."""
        signatures = self.root.findall("tp:Signature/ds:Signature", _NS)
        if not signatures or not self.verify_signature:
            return False
        if len(signatures) > 1:
            self.problem(
                signatures[1],
                f"the agreement carries {len(signatures)} signatures; only an agreement signed once (one "
                "enveloped ds:Signature over the whole document) can be verified here: check the signatures "
                "with another tool and load it with signature verification turned off",
            )
            return False
        signature = signatures[0]
        node = signature.find("ds:KeyInfo/ds:X509Data/ds:X509Certificate", _NS)
        der, certificate = b"", None
        if node is not None:
            try:
                der = base64.b64decode("".join((node.text or "").split()), validate=True)
                certificate = x509.load_der_x509_certificate(der)
            except (binascii.Error, ValueError):
                certificate = None
        if certificate is None:
            self.problem(
                signature,
                "the agreement's signature carries no usable ds:X509Certificate in its ds:KeyInfo; sign it again "
                "with the certificate included (it must be one of the parties' Certificate elements)",
            )
            return False
        if not any(der in c.x509 for c in self.certificates.values()):
            self.problem(
                signature,
                f"the agreement is signed by a certificate that is not one of the parties' "
                f"({certificate.subject.rfc4514_string()}); sign it with the key of a certificate listed in a "
                "PartyInfo/Certificate element",
            )
            return False
        references = signature.findall("ds:SignedInfo/ds:Reference", _NS)
        if len(references) != 1 or references[0].get("URI") != "":
            self.problem(
                signature,
                "the agreement's signature must be one enveloped signature over the whole document (a single "
                'ds:Reference with URI=""); sign it again that way',
            )
            return False
        from signxml.exceptions import SignXMLException
        from signxml.verifier import SignatureConfiguration, XMLVerifier

        config = SignatureConfiguration(location=f"./{{{TP}}}Signature/", expect_references=1)
        try:
            XMLVerifier().verify(self.data, x509_cert=certificate, expect_config=config)
        except (SignXMLException, ValueError) as exc:
            self.problem(
                signature,
                f"the agreement's signature does not verify ({exc}); if the document was changed after it was "
                "signed, get the signed original from your partner or have it signed again",
            )
            return False
        return True
