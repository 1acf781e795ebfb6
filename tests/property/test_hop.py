"""Forwarding by an intermediary over random SOAP Header layouts (msh.ebms.hop; ebMS2 §4.1.3, §10.1.5).

Hypothesis writes envelopes as other MSHs might: any prefix for the SOAP namespace (or none), Header
children of several kinds with and without a SOAP actor (next, nextMSH, toPartyMSH, a nearly-nextMSH
value, nextMSH spelt with a character reference), empty-element tags or content with nested elements,
comments, CDATA and references, attributes in any order and either quote, white space and comments of
every kind between them, CRLF or LF. The expectation is computed from the pieces the envelope was written
from: the forwarded bytes are those pieces with exactly the targeted Header children left out and the
inserts before the Header's end tag; the signed view (ebMS2 §4.1.3) never changes; a second hop with the
same inserts gives the same bytes. Random damage to an envelope ends in an EbmsError or a forwarded body,
never another exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, EB, SOAP_ACTOR_NEXT, SOAP_ENV
from msh.errors import EbmsError
from tests.support.hop import ACK_NEXT, SYNC_NEXT, TRACE_NEXT, forward, signed_view

NEXT_BY_REFERENCE = "urn:oasis:names:tc:ebxml-msg:actor:next&#77;SH"
# (attribute text as written, whether the ebMS signature transform leaves the element out)
ACTORS = [
    (None, False),
    (ACTOR_TO_PARTY_MSH, False),
    (ACTOR_NEXT_MSH, True),
    (SOAP_ACTOR_NEXT, True),
    (NEXT_BY_REFERENCE, True),
    (ACTOR_NEXT_MSH + " ", False),
    ("urn:oasis:names:tc:ebxml-msg:actor:nextmsh", False),
]
NAMES = [(f"{{{EB}}}", "eb", n) for n in ("AckRequested", "Acknowledgment", "SyncReply", "MessageOrder")] + [
    ("{urn:example:x}", "x", "Trace"),
    ("{urn:example:y}", "", "Audit"),  # in a default namespace of its own
]
SPACES = st.sampled_from(["", " ", "\t", "\n", "\r\n", "\r\n\t\t", "\n    ", "<!-- between -->", "<?pi x?>"])
CONTENT = st.sampled_from(
    [
        "text",
        "a &lt; b &amp; c &gt; d",
        "<![CDATA[</SOAP:Header> <x/> ]]>",
        "<!-- </Header> -->",
        "<eb:Inner>nested</eb:Inner>",
        f'<eb:Deep {{soap}}actor="{ACTOR_NEXT_MSH}">nested nextMSH: removed only with its parent</eb:Deep>',
        "\r\n\t<eb:Timestamp>2026-01-01T00:00:00Z</eb:Timestamp>\r\n\t",
    ]
)


@dataclass(frozen=True)
class Child:
    text: str
    clark: str
    targeted: bool


@st.composite
def children(draw: st.DrawFn, soap: str) -> Child:
    uri, prefix, local = draw(st.sampled_from(NAMES))
    qname = f"{prefix}:{local}" if prefix else local
    actor, targeted = draw(st.sampled_from(ACTORS))
    q = draw(st.sampled_from(['"', "'"]))
    attributes = [f"{soap}mustUnderstand={q}1{q}", f"eb:version={q}2.0{q}"]
    if actor is not None:
        attributes.append(f"{soap}actor{draw(st.sampled_from(['=', ' = ', '=']))}{q}{actor}{q}")
    if not prefix:
        attributes.append(f'xmlns="{uri[1:-1]}"')
    elif prefix == "x":
        attributes.append(f'xmlns:x="{uri[1:-1]}"')
    attributes = draw(st.permutations(attributes))
    gap = draw(st.sampled_from([" ", "\r\n\t", "\t"]))
    start = f"<{qname} " + gap.join(attributes) + draw(st.sampled_from(["", " ", "\n"]))
    if draw(st.booleans()):
        text = start + "/>"
    else:
        body = "".join(draw(st.lists(CONTENT, max_size=3))).replace("{soap}", soap)
        space = draw(st.sampled_from(["", " ", "\t"]))
        text = f"{start}>{body}</{qname}{space}>"
    return Child(text, f"{uri}{local}", targeted)


@st.composite
def envelopes(draw: st.DrawFn) -> tuple[str, list[str], list[Child], str, str]:
    """(text before the Header's children, the separators, the children, the Header end tag, the rest)."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    prefix = draw(st.sampled_from(["SOAP", "S", "soapenv", "s0", ""]))
    soap = f"{prefix}:" if prefix else ""
    # Attributes of the children use a prefix bound to the SOAP namespace even where it is the default.
    declare = f'xmlns:{prefix}="{SOAP_ENV}"' if prefix else f'xmlns="{SOAP_ENV}" xmlns:SOAP="{SOAP_ENV}"'
    attr = soap or "SOAP:"
    head = (
        draw(st.sampled_from(["", f'<?xml version="1.0" encoding="UTF-8"?>{nl}', f"<!-- c -->{nl}"]))
        + f'<{soap}Envelope {declare}{nl}\txmlns:eb="{EB}">{nl}<{soap}Header{draw(st.sampled_from(["", " "]))}>'
    )
    kids = draw(st.lists(children(attr), max_size=8))
    separators = [draw(SPACES).replace("\n", nl) for _ in range(len(kids) + 1)]
    end = f"</{soap}Header>"
    tail = f"{nl}<{soap}Body><eb:Manifest eb:version='2.0'/></{soap}Body>{nl}</{soap}Envelope>" + draw(
        st.sampled_from(["", nl, f"{nl}<!-- end -->"])
    )
    return head, separators, kids, end, tail


def written(head: str, separators: list[str], kids: list[Child], end: str, tail: str) -> str:
    """The envelope as the sender wrote it."""
    pieces = [head]
    for separator, kid in zip(separators, kids, strict=False):
        pieces += [separator, kid.text]
    return "".join(pieces) + separators[-1] + end + tail


INSERTS = st.lists(st.sampled_from([ACK_NEXT, SYNC_NEXT, TRACE_NEXT]), unique=True, max_size=3).map(tuple)
BOUNDARY = b"=_prop-b0und"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes(), INSERTS, st.none() | st.binary(max_size=200))
def test_exactly_the_targeted_header_children_change(
    layout: tuple[str, list[str], list[Child], str, str], inserts: tuple[str, ...], payload: bytes | None
) -> None:
    head, separators, kids, end, tail = layout
    original = written(head, separators, kids, end, tail).encode()
    # The separators stay even where the element after them goes (ebMS2 §10.1.5: white space stays).
    want_soap = (
        head
        + "".join(s + ("" if k.targeted else k.text) for s, k in zip(separators, kids, strict=False))
        + separators[-1]
        + "".join(inserts)
        + end
        + tail
    ).encode()

    if payload is None or BOUNDARY in payload:
        content_type = "text/xml"
        body = original
    else:
        content_type = f'multipart/related; type="text/xml"; boundary="{BOUNDARY.decode()}"'
        frame = b"--" + BOUNDARY + b"\r\nContent-Type: text/xml\r\n\r\n"
        body = frame + original + b"\r\n--" + BOUNDARY + b"\r\nContent-ID: <p@x>\r\n\r\n" + payload
        body += b"\r\n--" + BOUNDARY + b"--\r\n"

    result, forwarded = forward(body, content_type, inserts)
    assert result.soap_part == want_soap
    assert forwarded == body.replace(original, want_soap)
    assert result.removed == tuple(k.clark for k in kids if k.targeted)
    assert signed_view(want_soap) == signed_view(original)
    again, forwarded_again = forward(forwarded, content_type, inserts)
    assert forwarded_again == forwarded
    assert again.removed == tuple(_insert_names(inserts))


def _insert_names(inserts: tuple[str, ...]) -> list[str]:
    names = {ACK_NEXT: f"{{{EB}}}AckRequested", SYNC_NEXT: f"{{{EB}}}SyncReply", TRACE_NEXT: "{urn:example:via}Via"}
    return [names[i] for i in inserts]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes(), st.data())
def test_damaged_envelopes_end_in_an_ebms_error_or_a_forwarded_body(
    layout: tuple[str, list[str], list[Child], str, str], data: st.DataObject
) -> None:
    original = bytearray(written(*layout).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        if not original:
            break
        at = data.draw(st.integers(0, len(original) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            original[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del original[at : at + data.draw(st.integers(1, 40))]
        else:
            original[at:at] = data.draw(
                st.sampled_from([b"<", b">", b"&", b"<!DOCTYPE x>", b"\x00", b"\xff\xfe", b"/"])
            )
    content_type = data.draw(st.sampled_from(["text/xml", "text/xml; charset=utf-16", "application/soap+xml"]))
    try:
        result, forwarded = forward(bytes(original), content_type, (ACK_NEXT,))
    except EbmsError as exc:
        assert exc.description
    else:
        assert forwarded == result.soap_part
