"""CPP/A 2.0 IDs and the references to them (xs:ID / xs:IDREF), checked here: libxml2 does not check that
an IDREF names an element, let alone one of the right kind."""

from __future__ import annotations

from typing import Final

from lxml import etree

from cpa.document import ProblemSink, local_name, tp_attr, tp_tag

__all__ = ["References"]

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


class References:
    """The IDs of one agreement, and the references to them resolved; a reference that cannot be
    resolved is a problem, recorded in ``problem``."""

    def __init__(self, root: etree._Element, problem: ProblemSink) -> None:
        self.problem = problem
        self.ids: dict[str, list[etree._Element]] = {}
        for element in root.iter(*(tp_tag(local) for local in _ID_ATTRIBUTES)):
            value = tp_attr(element, _ID_ATTRIBUTES[local_name(element)])
            if value:
                self.ids.setdefault(value, []).append(element)

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
        label = f"{local_name(ref)}@{attribute}" if attribute else local_name(ref)
        id_attribute = _ID_ATTRIBUTES[kinds[0]]
        kind = " or ".join(kinds)
        if not value:
            self.problem(ref, f"{label} is empty; give the {id_attribute} of a {kind}", attribute)
            return None
        candidates = self.ids.get(value, [])
        matching = [c for c in candidates if local_name(c) in kinds]
        if matching:
            party = self._party_of(ref)
            return next((c for c in matching if self._party_of(c) is party), matching[0])
        if candidates:
            message = (
                f"{label} '{value}' names a {local_name(candidates[0])}, not a {kind}; "
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
        for ancestor in element.iterancestors(tp_tag("PartyInfo")):
            return ancestor
        return None
