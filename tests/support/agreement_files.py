"""Agreement documents built by the tests, in the shapes that agreements written by other tools take.

Each starts from the project's own demo agreement (``samples/cpas/demo-a-b.xml``) and changes it the way
production agreements differ from it: durations counting months and years, a ``ds:Signature`` left as an
unfilled template, no optional parts at all. :func:`built_agreements` lists every one of them that loads,
for tests that must work on any agreement ``msh cpa validate`` accepts.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parents[2]
DEMO_A_B = ROOT / "samples" / "cpas" / "demo-a-b.xml"
DEMO_ROUTED = ROOT / "samples" / "cpas" / "demo-routed-a-c.xml"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
DS = "http://www.w3.org/2000/09/xmldsig#"

_C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
_ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
_RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
_SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"

EMPTY_KEY_INFO = "<ds:KeyInfo><ds:X509Data><ds:X509Certificate/></ds:X509Data></ds:KeyInfo>"


def demo_bytes() -> bytes:
    return DEMO_A_B.read_bytes()


def replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


def with_month_durations(data: bytes | None = None) -> bytes:
    """RetryInterval P1M, PersistDuration P180M (15 years) and P1Y2M, timeToPerform P1Y: legal
    xs:durations that count months and years."""
    data = demo_bytes() if data is None else data
    data = replace_once(data, b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>P1M<")
    data = replace_once(data, b"<tp:PersistDuration>P1D<", b"<tp:PersistDuration>P180M<")
    data = replace_once(data, b"<tp:PersistDuration>P1D<", b"<tp:PersistDuration>P1Y2M<")
    return data.replace(b'tp:timeToPerform="P1D"', b'tp:timeToPerform="P1Y"')


def signature_template(signature_value: str = "", digest_value: str = "", key_info: str = EMPTY_KEY_INFO) -> str:
    """A tp:Signature holding one ds:Signature as signing tools generate it before they sign: the given
    SignatureValue, DigestValue and KeyInfo (empty by default)."""
    return (
        f'<tp:Signature><ds:Signature Id="cpa-signature">'
        f'<ds:SignedInfo><ds:CanonicalizationMethod Algorithm="{_C14N}"/>'
        f'<ds:SignatureMethod Algorithm="{_RSA_SHA256}"/>'
        f'<ds:Reference URI=""><ds:Transforms><ds:Transform Algorithm="{_ENVELOPED}"/></ds:Transforms>'
        f'<ds:DigestMethod Algorithm="{_SHA256}"/><ds:DigestValue>{digest_value}</ds:DigestValue></ds:Reference>'
        f"</ds:SignedInfo><ds:SignatureValue>{signature_value}</ds:SignatureValue>{key_info}</ds:Signature>"
        "</tp:Signature>\n  "
    )


def with_signature(signature: str, data: bytes | None = None) -> bytes:
    """``data`` (the demo agreement) with ``signature`` (a tp:Signature) where the schema puts it, on a line
    of its own before tp:Comment."""
    data = demo_bytes() if data is None else data
    return replace_once(data, b"<tp:Comment", signature.encode() + b"<tp:Comment")


def without_optional_parts() -> bytes:
    """The demo agreement without any element the schema lets it leave out that it can do without:
    no Comment, no PersistDuration, no ReliableMessaging, no signing (Sender/ReceiverNonRepudiation), no
    TLS (TransportClient/ServerSecurity, plain http endpoints)."""
    root = etree.fromstring(demo_bytes())
    for local in (
        "Comment",
        "PersistDuration",
        "ReliableMessaging",
        "SenderNonRepudiation",
        "ReceiverNonRepudiation",
        "TransportClientSecurity",
        "TransportServerSecurity",
    ):
        for element in list(root.iter(f"{{{TP}}}{local}")):
            parent = element.getparent()
            assert parent is not None
            parent.remove(element)
    for endpoint in root.iter(f"{{{TP}}}Endpoint"):
        endpoint.set(f"{{{TP}}}uri", endpoint.get(f"{{{TP}}}uri", "").replace("https:", "http:"))
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def built_agreements() -> dict[str, bytes]:
    """Every agreement the tests build that loads (some with warnings), by name."""
    return {
        "demo-a-b": demo_bytes(),
        "demo-routed-a-c": DEMO_ROUTED.read_bytes(),
        "month-durations": with_month_durations(),
        "signature-template-empty": with_signature(signature_template()),
        "signature-template-no-key": with_signature(
            signature_template("c2lnbmF0dXJl", "ZGlnZXN0", "<ds:KeyInfo><ds:KeyName/></ds:KeyInfo>")
        ),
        "signature-template-bare-key-info": with_signature(signature_template(key_info="<ds:KeyInfo/>")),
        "month-durations-and-template": with_signature(signature_template(), with_month_durations()),
        "without-optional-parts": without_optional_parts(),
        "message-order": with_message_order(),
    }


def with_message_order(data: bytes | None = None) -> bytes:
    """The agreement with message order guaranteed on the business channels (MessageOrderSemantics
    Guaranteed, CPP/A 2.0 §8.4.38) and, as ebMS2 §9.1 requires with it, no SyncReply (syncReplyMode none:
    acknowledgments come back asynchronously); acknowledgments and duplicate elimination are already
    always asked for."""
    data = demo_bytes() if data is None else data
    assert data.count(b">NotGuaranteed<") == 4 and data.count(b'tp:syncReplyMode="mshSignalsOnly"') == 2
    data = data.replace(b">NotGuaranteed<", b">Guaranteed<")
    return data.replace(b'tp:syncReplyMode="mshSignalsOnly"', b'tp:syncReplyMode="none"')
