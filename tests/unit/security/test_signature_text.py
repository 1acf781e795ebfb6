"""The signature written as text (msh.security.signature_text, fast_signing.signed_as_text) is byte for byte
the signature the tree path writes (signature_template + sign_in_place + etree.tostring), and both are
libxmlsec's: over prefixes, namespace declarations on the Envelope and the Header, elements aimed at the next
MSH or node, white space, comments, the XML declaration, every RSA algorithm and digest, zero to three
payloads, chain certificates, with and without the XPath filter. Where the text would not be exact, the tree
is signed, and the bytes are the same."""

from __future__ import annotations

import functools
import io
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from cryptography import x509
from lxml import etree

from msh.ebms import model as m
from msh.ebms.envelope import serialise_envelope
from msh.ebms.mime import PartBody
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.security import fast_signing, sign, signature_text
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm
from msh.security.signing import _key_info_text, key_info
from tests.support.cpa_factory import make_envelope
from tests.support.security import NEXT_MSH_ACK, NEXT_SYNC_REPLY, certificate, envelope, rsa_key
from tests.unit.security.test_fast_signing import NESTED, _xmlsec_verifies

DSIG = "http://www.w3.org/2000/09/xmldsig#"
ALGORITHMS = [
    (SignatureAlgorithm.RSA_SHA1, DigestAlgorithm.SHA1),
    (SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256),
    (SignatureAlgorithm.RSA_SHA384, DigestAlgorithm.SHA384),
    (SignatureAlgorithm.RSA_SHA512, DigestAlgorithm.SHA512),
    (SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA1),
]
CONTENTS = [b"<Order><Id>PO-1</Id></Order>", bytes(range(256)) * 4, b"", "caf\u00e9 \u2603".encode()]
CONTENT_IDS = ["order@a.example", "scan@a.example", "o'der part@a.example", "4th@a.example"]
# Namespace declarations put on the Envelope or the Header: whether the text applies then.
DECLARATIONS = {
    "": True,
    f'xmlns:ds="{DSIG}"': True,  # ds already bound: no declaration on ds:Signature
    'xmlns:ds="urn:example:not-dsig"': True,  # ds bound elsewhere: ds:Signature declares it again
    'xmlns="urn:example:default"': True,
    'xmlns:zz="urn:example:z" xmlns:aa="urn:example:a" xmlns:a1="urn:example:a1"': True,
    'xmlns:SOAP="urn:example:other-soap"': True,  # with another Envelope prefix: ds:XPath declares SOAP
    f'xmlns:dsig="{DSIG}"': False,  # XML-DSig under another prefix
    'xmlns:odd="urn:example:a&amp;b"': False,  # a namespace name written otherwise by C14N
    'xmlns:q="urn:example:it\'s"': True,
}
HEADER_ENDS = {
    "": "",
    "ack": NEXT_MSH_ACK,
    "sync": NEXT_SYNC_REPLY,
    "both": NEXT_MSH_ACK + "\n    " + NEXT_SYNC_REPLY,
    "nested": NESTED,
    "comment": NEXT_MSH_ACK + "<!-- last -->",
    "pi": "<?last pi?>",
}


@dataclass(frozen=True)
class Case:
    prefix: str
    envelope_ns: str
    header_ns: str
    header_end: str
    compact: bool
    declaration: bool
    payloads: int
    algorithms: tuple[SignatureAlgorithm, DigestAlgorithm]
    chain: int
    xpath_filter: bool
    empty_header: bool = False
    raw: bytes | None = None  # the SOAP part as it is, instead of one made from the fields above

    def soap(self) -> bytes:
        if self.raw is not None:
            return self.raw
        cids = tuple(CONTENT_IDS[: self.payloads])
        text = envelope(payloads=cids, header_extra=HEADER_ENDS[self.header_end], prefix=self.prefix).decode()
        p = self.prefix
        if self.envelope_ns:
            text = text.replace(f"<{p}:Envelope ", f"<{p}:Envelope {self.envelope_ns} ", 1)
        if self.header_ns:
            text = text.replace(f"<{p}:Header>", f"<{p}:Header {self.header_ns}>", 1)
        if self.empty_header:
            text = re.sub(rf"(<{p}:Header[^>]*>).*</{p}:Header>", r"\1</" + p + ":Header>", text, flags=re.S)
        if self.compact:
            text = re.sub(r">\s+<", "><", text)
        if not self.declaration:
            text = re.sub(r"^<\?xml[^>]*\?>\s*", "", text)
        return text.encode()

    def payload_map(self) -> dict[str, object]:
        forms: list[object] = [
            CONTENTS[0],
            PartBody.from_bytes(CONTENTS[1]),
            io.BytesIO(CONTENTS[2]),
            bytearray(CONTENTS[3]),
        ]
        return {f"<{cid}>" if i == 3 else cid: forms[i] for i, cid in enumerate(CONTENT_IDS[: self.payloads])}

    def text_applies(self) -> bool:
        return DECLARATIONS[self.envelope_ns] and DECLARATIONS[self.header_ns]


@functools.cache
def _certificate(name: str) -> x509.Certificate:
    return certificate(name, ca=name != "text-a")


def _chain(n: int) -> tuple[x509.Certificate, ...]:
    return tuple(_certificate(f"text-ca-{i}") for i in range(n))


def _cases() -> Iterator[Case]:
    rng = random.Random(24)
    declarations = list(DECLARATIONS)
    for _ in range(60):
        prefix = rng.choice(["SOAP", "soapenv", "SOAP-ENV"])
        # The Envelope's own prefix is not bound again (that would be another Envelope, or no Header).
        usable = [d for d in declarations if f"xmlns:{prefix}=" not in d]
        yield Case(
            prefix=prefix,
            envelope_ns=rng.choice(usable),
            header_ns=rng.choice(usable),
            header_end=rng.choice(list(HEADER_ENDS)),
            compact=rng.random() < 0.5,
            declaration=rng.random() < 0.7,
            payloads=rng.randrange(4),
            algorithms=rng.choice(ALGORITHMS),
            chain=rng.randrange(3),
            xpath_filter=rng.random() < 0.8,
            empty_header=rng.random() < 0.1,
        )


CASES = [
    Case("SOAP", "", "", "", True, True, 2, ALGORITHMS[1], 0, True),
    Case("SOAP", "", "", "ack", False, True, 2, ALGORITHMS[1], 1, True),
    Case("soapenv", 'xmlns:SOAP="urn:example:other-soap"', "", "both", False, False, 3, ALGORITHMS[3], 2, True),
    Case("SOAP", "", "", "", True, True, 0, ALGORITHMS[0], 0, False, empty_header=True),
    *_cases(),
]


class _Spy:
    """Records what signed_as_text returned (None: the tree was signed)."""

    def __init__(self) -> None:
        self.results: list[bool] = []
        self._real = fast_signing.signed_as_text

    def __call__(self, *args: object, **kwargs: object) -> bytes | None:
        out = self._real(*args, **kwargs)  # type: ignore[arg-type]
        self.results.append(out is not None)
        return out


def _signed(case: Case, monkeypatch: pytest.MonkeyPatch, path: str) -> bytes:
    method, digest = case.algorithms
    key, cert = rsa_key("text-a"), _certificate("text-a")
    with monkeypatch.context() as m:
        if path == "tree":
            m.setattr(fast_signing, "signed_as_text", lambda *a, **k: None)
        elif path == "libxmlsec":
            m.setattr(fast_signing, "applies", lambda *a: False)
        return sign(
            case.soap(),
            case.payload_map(),  # type: ignore[arg-type]
            key,
            cert,
            method,
            digest,
            chain=_chain(case.chain),
            xpath_filter=case.xpath_filter,
        )


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_text_tree_and_libxmlsec_write_the_same_bytes(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy()
    with monkeypatch.context() as m:
        m.setattr(fast_signing, "signed_as_text", spy)
        text = _signed(case, monkeypatch, "text")
    assert spy.results == [case.text_applies()]
    tree = _signed(case, monkeypatch, "tree")
    libxmlsec = _signed(case, monkeypatch, "libxmlsec")
    assert text == tree == libxmlsec
    payloads = {cid.strip("<>"): content for cid, content in zip(CONTENT_IDS, CONTENTS, strict=False)}
    assert _xmlsec_verifies(text, dict(list(payloads.items())[: case.payloads]), _certificate("text-a"))


@pytest.mark.parametrize("actor", [ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH])
@pytest.mark.parametrize("xpath_filter", [True, False])
def test_the_envelopes_the_msh_composes(monkeypatch: pytest.MonkeyPatch, actor: str, xpath_filter: bool) -> None:
    # As the MSH writes them (msh.ebms.envelope.writing_text): no white space, the ebXML prefixes.
    references = tuple(m.Reference(f"cid:{cid}") for cid in CONTENT_IDS[:2])
    composed = replace(make_envelope(ack_actor=actor), manifest=m.Manifest(references))
    case = Case("SOAP", "", "", "", True, True, 2, ALGORITHMS[1], 1, xpath_filter)
    soap = serialise_envelope(composed)
    assert b">\n" not in soap.split(b"\n", 1)[1]
    case = replace(case, raw=soap)
    spy = _Spy()
    with monkeypatch.context() as patch:
        patch.setattr(fast_signing, "signed_as_text", spy)
        text = _signed(case, monkeypatch, "text")
    assert spy.results == [True]
    assert text == _signed(case, monkeypatch, "tree") == _signed(case, monkeypatch, "libxmlsec")


def test_the_mark_in_the_document_leaves_it_to_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    mark = fast_signing._MARK.encode()
    soap = CASES[0].soap().replace(b"</SOAP:Body>", b"<!-- " + mark + b" --></SOAP:Body>")
    case = replace(CASES[0], raw=soap)
    spy = _Spy()
    with monkeypatch.context() as m:
        m.setattr(fast_signing, "signed_as_text", spy)
        text = _signed(case, monkeypatch, "text")
    assert spy.results == [False]
    assert text == _signed(case, monkeypatch, "libxmlsec")


def test_a_reference_uri_that_is_not_plain_leaves_it_to_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    soap = envelope(payloads=("a@x",)).replace(b'"cid:a@x"', b'"cid:a&amp;b@x"')
    key, cert = rsa_key("text-a"), _certificate("text-a")
    spy = _Spy()
    with monkeypatch.context() as m:
        m.setattr(fast_signing, "signed_as_text", spy)
        text = sign(soap, {"a&b@x": b"x"}, key, cert, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256)
    assert spy.results == [False]
    with monkeypatch.context() as m:
        m.setattr(fast_signing, "applies", lambda *a: False)
        slow = sign(soap, {"a&b@x": b"x"}, key, cert, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256)
    assert text == slow


def test_the_key_info_text_is_the_elements_serialised() -> None:
    certificates = (_certificate("text-a"), *_chain(2))
    root = etree.Element("r", nsmap={"ds": DSIG})
    root.append(key_info(certificates))
    serialised = etree.tostring(root, encoding="unicode")
    assert serialised[serialised.index(">") + 1 : -len("</r>")] == _key_info_text(certificates)


def test_plain_uris() -> None:
    assert signature_text.plain_uri("cid:order@a.example")
    assert signature_text.plain_uri("cid:o'der part@a.example")
    for uri in ('cid:"q"', "cid:a&b", "cid:<a>", "cid:caf\u00e9", "cid:a\tb", "cid:a\nb"):
        assert not signature_text.plain_uri(uri)
