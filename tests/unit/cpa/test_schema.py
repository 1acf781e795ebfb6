"""Unit tests of the project's CPP/A 2.0 schema (schemas/cpp-cpa-2_0.xsd) on a small hand-written CPA.

Needs nothing outside the project: every case is judged by libxml2 (lxml) and by xmlschema, which must
agree. The comparison with the official OASIS schema lives in tests/interop/test_cpa_schema_equivalence.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import xmlschema
from lxml import etree

SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "cpp-cpa-2_0.xsd"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"


def party(name: str) -> str:
    return f"""
  <tp:PartyInfo tp:partyName="{name}" tp:defaultMshChannelId="{name}-channel" tp:defaultMshPackageId="pkg">
    <tp:PartyId tp:type="urn:example:party">{name}</tp:PartyId>
    <tp:PartyRef xlink:href="http://example.com/{name}"/>
    <tp:CollaborationRole>
      <tp:ProcessSpecification tp:name="Ordering" tp:version="1.0" xlink:href="http://example.com/bpss"/>
      <tp:Role tp:name="{name}-role" xlink:href="http://example.com/bpss#{name}"/>
      <tp:ServiceBinding>
        <tp:Service tp:type="urn:example:services">Ordering</tp:Service>
        <tp:CanSend>
          <tp:ThisPartyActionBinding tp:id="{name}-send" tp:action="Order" tp:packageId="pkg">
            <tp:BusinessTransactionCharacteristics tp:isConfidential="none" tp:timeToPerform="P1D"/>
            <tp:ChannelId>{name}-channel</tp:ChannelId>
          </tp:ThisPartyActionBinding>
        </tp:CanSend>
      </tp:ServiceBinding>
    </tp:CollaborationRole>
    <tp:DeliveryChannel tp:channelId="{name}-channel" tp:transportId="{name}-transport"
                        tp:docExchangeId="{name}-docexchange">
      <tp:MessagingCharacteristics tp:syncReplyMode="none" tp:ackRequested="always"
                                   tp:ackSignatureRequested="never" tp:duplicateElimination="always"/>
    </tp:DeliveryChannel>
    <tp:Transport tp:transportId="{name}-transport">
      <tp:TransportReceiver>
        <tp:TransportProtocol tp:version="1.1">HTTP</tp:TransportProtocol>
        <tp:Endpoint tp:uri="https://{name}.example.com/ebms" tp:type="allPurpose"/>
      </tp:TransportReceiver>
    </tp:Transport>
    <tp:DocExchange tp:docExchangeId="{name}-docexchange">
      <tp:ebXMLReceiverBinding tp:version="2.0">
        <tp:ReliableMessaging>
          <tp:Retries>3</tp:Retries>
          <tp:RetryInterval>PT30S</tp:RetryInterval>
          <tp:MessageOrderSemantics>NotGuaranteed</tp:MessageOrderSemantics>
        </tp:ReliableMessaging>
        <tp:PersistDuration>P1D</tp:PersistDuration>
      </tp:ebXMLReceiverBinding>
    </tp:DocExchange>
  </tp:PartyInfo>"""


VALID_CPA = f"""<tp:CollaborationProtocolAgreement xmlns:tp="{TP}" xmlns:xlink="http://www.w3.org/1999/xlink"
    tp:cpaid="urn:example:cpa:1" tp:version="2.0">
  <tp:Status tp:value="agreed"/>
  <tp:Start>2024-01-01T00:00:00Z</tp:Start>
  <tp:End>2030-01-01T00:00:00Z</tp:End>
  {party("buyer")}
  {party("seller")}
  <tp:SimplePart tp:id="header" tp:mimetype="text/xml"/>
  <tp:SimplePart tp:id="payload" tp:mimetype="application/xml"/>
  <tp:Packaging tp:id="pkg">
    <tp:ProcessingCapabilities tp:parse="true" tp:generate="true"/>
    <tp:CompositeList>
      <tp:Composite tp:id="message" tp:mimetype="multipart/related" tp:mimeparameters="type=text/xml">
        <tp:Constituent tp:idref="header"/>
        <tp:Constituent tp:idref="payload"/>
      </tp:Composite>
    </tp:CompositeList>
  </tp:Packaging>
  <tp:Comment xml:lang="en">hand-written</tp:Comment>
</tp:CollaborationProtocolAgreement>"""


@cache
def _schemas() -> tuple[etree.XMLSchema, xmlschema.XMLSchema]:
    return etree.XMLSchema(etree.parse(str(SCHEMA))), xmlschema.XMLSchema(str(SCHEMA))


def verdict(text: str) -> bool:
    """The schema's verdict on ``text``; libxml2 and xmlschema must agree."""
    lxml_schema, xs_schema = _schemas()
    document = etree.ElementTree(etree.fromstring(text.encode()))
    by_lxml = lxml_schema.validate(document)
    by_xmlschema = xs_schema.is_valid(document)
    assert by_lxml == by_xmlschema, (by_lxml, by_xmlschema, str(lxml_schema.error_log))
    return by_lxml


def test_schema_target_namespace() -> None:
    assert xmlschema.XMLSchema(str(SCHEMA)).target_namespace == TP


def test_minimal_cpa_is_valid() -> None:
    lxml_schema, _ = _schemas()
    assert verdict(VALID_CPA), str(lxml_schema.error_log)


BROKEN = {
    "missing-Status": ('<tp:Status tp:value="agreed"/>', ""),
    "bad-Status": ('tp:value="agreed"', 'tp:value="approved"'),
    "bad-syncReplyMode": ('tp:syncReplyMode="none"', 'tp:syncReplyMode="sync"'),
    "bad-ackRequested": ('tp:ackRequested="always"', 'tp:ackRequested="true"'),
    "bad-Start": ("<tp:Start>2024-01-01T00:00:00Z", "<tp:Start>yesterday"),
    "bad-RetryInterval": ("<tp:RetryInterval>PT30S", "<tp:RetryInterval>30s"),
    "bad-MessageOrderSemantics": (">NotGuaranteed<", ">Unordered<"),
    "missing-cpaid": ('tp:cpaid="urn:example:cpa:1"', ""),
    "unqualified-cpaid": ('tp:cpaid="urn:example:cpa:1"', 'cpaid="urn:example:cpa:1"'),
    "End-before-Start": (
        "<tp:Start>2024-01-01T00:00:00Z</tp:Start>\n  <tp:End>2030-01-01T00:00:00Z</tp:End>",
        "<tp:End>2030-01-01T00:00:00Z</tp:End>\n  <tp:Start>2024-01-01T00:00:00Z</tp:Start>",
    ),
    "duplicate-id": ('tp:id="payload"', 'tp:id="header"'),
    "unknown-element": ("<tp:Comment", "<tp:Remark>x</tp:Remark>\n  <tp:Comment"),
    "missing-ProcessingCapabilities": ('<tp:ProcessingCapabilities tp:parse="true" tp:generate="true"/>', ""),
    "bad-persistence-level": ('tp:isConfidential="none"', 'tp:isConfidential="secret"'),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_variant_is_invalid(name: str) -> None:
    old, new = BROKEN[name]
    assert old in VALID_CPA
    assert not verdict(VALID_CPA.replace(old, new, 1))


def test_single_party_agreement_is_invalid() -> None:
    text = VALID_CPA.replace(party("seller"), "", 1)
    assert not verdict(text)


def test_profile_with_one_party_is_valid() -> None:
    text = (
        VALID_CPA.replace("CollaborationProtocolAgreement", "CollaborationProtocolProfile")
        .replace('tp:cpaid="urn:example:cpa:1"', 'tp:cppid="urn:example:cpp:1"')
        .replace('<tp:Status tp:value="agreed"/>', "")
        .replace("<tp:Start>2024-01-01T00:00:00Z</tp:Start>", "")
        .replace("<tp:End>2030-01-01T00:00:00Z</tp:End>", "")
        .replace(party("seller"), "", 1)
    )
    assert verdict(text)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('tp:type="allPurpose"', 'tp:type="login"'),
        ('tp:syncReplyMode="none"', 'tp:syncReplyMode="signalsAndResponse"'),
        ('tp:value="agreed"', 'tp:value=" signed "'),
        ("<tp:Retries>3</tp:Retries>\n", ""),
    ],
)
def test_accepted_variants(old: str, new: str) -> None:
    assert old in VALID_CPA
    assert verdict(VALID_CPA.replace(old, new, 1))
