"""What each payload Reference of a received signature names in the message package (ebMS2 §4.1.3).

"Each payload object requiring signing SHALL be represented by a [XMLDSIG] Reference element that SHALL
have a URI attribute resolving to the payload object. This can be either the Content-Id URI of the MIME
body part of the payload object, or a URI matching the Content-Location of the MIME body part of the
payload object, or a URI that resolves to a payload object external to the Message Package."

:func:`resolve` decides, for every Reference but the envelope's (``URI=""``), which payload part it names,
before any digest is computed; libxmlsec and the check without it then read exactly that part
(:meth:`Resolution.uri_table`, given to :func:`msh.security.library.resolving_parts`):

* ``cid:`` URIs (RFC 2392; the scheme in any case, the Content-ID %-escaped or not, with or without its
  angle brackets) name the part with that Content-ID; one the package does not carry is refused.
* Any other URI names the part whose Content-Location header is that URI, compared as written (RFC 2557
  leaves relative Content-Locations to a base this MSH does not guess); two parts with that
  Content-Location make the Reference ambiguous, and it is refused.
* **Decision (the spec leaves it open):** a URI that names no part of the package, which ebMS2 §4.1.3
  allows to resolve "to a payload object external to the Message Package", is refused with that reason.
  This MSH never fetches a file or a URL because a received message says so (a hostile Reference would make
  it read local files or reach internal hosts), and a signature whose Reference cannot be checked cannot
  be verified (XML-DSig §3.2.1: every Reference is validated).
* A same-document Reference (``#id``) or a URI with a fragment (XPointer into a part) is refused: the
  profile signs the envelope with ``URI=""`` and each payload as a whole.

Several References may name the same part (each digest is checked); the payload parts no Reference names
are :attr:`Resolution.unsigned` (see :mod:`msh.security.verifying` for what is done with them).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from lxml import etree

from msh.ebms.mime import MimePart
from msh.security.library import Payload, bare_content_id
from msh.security.profile import ds_children, reference_path

__all__ = ["Named", "PackageParts", "Resolution", "ResolvedReference", "content_locations", "resolve"]

_CID: Final = "cid:"


class Named(StrEnum):
    """How a Reference URI names its payload part (ebMS2 §4.1.3)."""

    CONTENT_ID = "Content-ID"
    CONTENT_LOCATION = "Content-Location"


@dataclass(frozen=True, slots=True)
class PackageParts:
    """The payload parts of a message package a signature may name: ``contents`` maps each bare Content-ID
    to the part's content (in package order), ``locations`` each bare Content-ID to the part's
    Content-Location header, for the parts that carry one."""

    contents: Mapping[str, Payload]
    locations: Mapping[str, str]

    @classmethod
    def of(cls, payloads: Mapping[str, Payload], locations: Mapping[str, str] | None = None) -> PackageParts:
        """The parts of ``payloads`` (Content-ID -> content; the Content-IDs bare, ``cid:`` or in brackets)
        with the Content-Locations of ``locations`` (Content-ID -> Content-Location)."""
        contents = {bare_content_id(cid): body for cid, body in payloads.items()}
        places = {bare_content_id(cid): " ".join(place.split()) for cid, place in (locations or {}).items() if place}
        return cls(contents, places)


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """A payload Reference and the part it names: ``content_id`` (bare), named by its ``cid:`` URI or by
    the part's Content-Location (``named``)."""

    uri: str
    content_id: str
    named: Named

    @property
    def location(self) -> str:
        """ebMS2 §4.2.3.2.5 location of an error in this payload: the part's Content-ID URI."""
        return self.uri if self.named is Named.CONTENT_ID else f"cid:{self.content_id}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The payload References of a signature resolved against a package: ``references`` those that name a
    part, ``problems`` (description, location) for those refused, ``unsigned`` the Content-IDs of the parts
    no Reference names (in package order)."""

    references: tuple[ResolvedReference, ...]
    problems: tuple[tuple[str, str], ...]
    unsigned: tuple[str, ...]

    @property
    def signed(self) -> tuple[str, ...]:
        """The Content-IDs of the parts some Reference names, in the order they are first named."""
        return tuple(dict.fromkeys(r.content_id for r in self.references))

    def uri_table(self) -> dict[str, str]:
        """Each Reference URI as written and %-decoded (libxmlsec tries the decoded form first) -> the
        Content-ID of the part it names: what the I/O callbacks may open, and nothing else."""
        table: dict[str, str] = {}
        for reference in self.references:
            for form in _forms(reference.uri):
                table.setdefault(form, reference.content_id)
        return table


def content_locations(parts: Iterable[MimePart]) -> dict[str, str]:
    """The Content-Location header of each of ``parts`` that has one and a Content-ID, by Content-ID: the
    ``locations`` of :func:`msh.security.verify`."""
    out = {}
    for part in parts:
        place = part.header("Content-Location")
        if place and part.content_id:
            out[part.content_id] = place
    return out


def _forms(uri: str) -> Iterable[str]:
    return dict.fromkeys((uri, urllib.parse.unquote(uri)))


def _owners(parts: PackageParts) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for cid, place in parts.locations.items():
        owners.setdefault(place, []).append(cid)
    return owners


def _resolve_one(uri: str, parts: PackageParts, owners: Mapping[str, list[str]]) -> ResolvedReference | tuple[str, str]:
    where = reference_path(uri)
    if uri.startswith("#"):
        return (
            f"the signature has a Reference to {uri!r}, an element of the envelope by its id; ebMS2 §4.1.3 signs "
            'the envelope with the Reference URI="" and each payload part as a whole',
            where,
        )
    if "#" in uri:
        return (
            f"the signature's Reference {uri!r} has a fragment, selecting a piece of a payload part; ebMS2 §4.1.3 "
            "signs each payload part as a whole",
            where,
        )
    if uri[: len(_CID)].lower() == _CID:
        cid = bare_content_id(uri)
        if cid not in parts.contents:
            return (f"the signature signs payload part {uri}, which the message does not carry", uri)
        return ResolvedReference(uri, cid, Named.CONTENT_ID)
    carriers = owners.get(uri, [])
    if len(carriers) > 1:
        return (
            f"the signature's Reference {uri!r} matches the Content-Location of {len(carriers)} payload parts "
            f"({', '.join('cid:' + c for c in carriers)}), so it does not say which one it signs",
            where,
        )
    if carriers:
        return ResolvedReference(uri, carriers[0], Named.CONTENT_LOCATION)
    return (
        f'the signature\'s Reference {uri!r} is neither the envelope (URI="") nor a part of this message (no '
        "payload part has that Content-ID or Content-Location); ebMS2 §4.1.3 lets a Reference name a payload "
        "outside the message package, and this MSH reads only the message's own parts, never a file or a URL a "
        "message names, so the signature cannot be verified: sign the payload as a MIME part of the message",
        where,
    )


def resolve(signature: etree._Element, parts: PackageParts) -> Resolution:
    """The payload References of ``signature``'s SignedInfo resolved against ``parts`` (see the module docs)."""
    owners = _owners(parts)
    resolved: list[ResolvedReference] = []
    problems: list[tuple[str, str]] = []
    for element in ds_children(signature, "SignedInfo", "Reference"):
        uri = element.get("URI")
        if uri == "":
            continue
        if uri is None:
            # ebMS2 §4.1.3: each payload Reference SHALL have a URI attribute resolving to the payload object.
            problems.append(
                (
                    "the signature has a Reference without a URI attribute; ebMS2 §4.1.3 names each signed payload "
                    "part by a URI (its cid: Content-ID or its Content-Location)",
                    reference_path(None),
                )
            )
            continue
        outcome = _resolve_one(uri, parts, owners)
        if isinstance(outcome, ResolvedReference):
            resolved.append(outcome)
        else:
            problems.append(outcome)
    problems += _clashes(resolved)
    named = {r.content_id for r in resolved}
    unsigned = tuple(cid for cid in parts.contents if cid not in named)
    return Resolution(tuple(resolved), tuple(problems), unsigned)


def _clashes(resolved: Iterable[ResolvedReference]) -> list[tuple[str, str]]:
    """References whose URIs, as written or %-decoded, read the same and name different parts (libxmlsec
    would open one for the other)."""
    seen: dict[str, ResolvedReference] = {}
    problems = []
    for reference in resolved:
        for form in _forms(reference.uri):
            other = seen.setdefault(form, reference)
            if other.content_id != reference.content_id:
                problems.append(
                    (
                        f"the signature's References {other.uri!r} and {reference.uri!r} read the same once "
                        f"%-decoded but name different payload parts (cid:{other.content_id}, "
                        f"cid:{reference.content_id})",
                        reference_path(reference.uri),
                    )
                )
    return problems
