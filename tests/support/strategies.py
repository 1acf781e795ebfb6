"""Hypothesis strategies generating ebMS 2.0 header models."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st
from lxml import etree

from msh.ebms import model as m
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.errors import Severity

# XML 1.0 characters, no control characters, no surrogates; values are stripped by the codec.
_chars = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp"), exclude_characters="\ufffe\uffff")
token = st.text(_chars, min_size=1, max_size=30).map(str.strip).filter(bool)
opt_token = st.none() | token
uri = st.from_regex(r"urn:[a-z]{1,8}:[A-Za-z0-9.\-]{1,20}", fullmatch=True)

datetimes = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC) | st.none()
)


@st.composite
def foreign_elements(draw: st.DrawFn) -> str:
    el = etree.Element("{urn:test:ext}Extra", nsmap={"t": "urn:test:ext"})
    el.text = draw(token)
    if draw(st.booleans()):
        el.set("{urn:test:ext}attr", draw(token))
    return etree.tostring(el, method="c14n", exclusive=True).decode()


extensions = st.builds(
    m.Extensions,
    elements=st.lists(foreign_elements(), max_size=2).map(tuple),
    attributes=st.lists(st.tuples(st.just("{urn:test:ext}flag"), token), max_size=1).map(tuple),
)
party_ids = st.builds(m.PartyId, value=token, type=opt_token)
parties = st.builds(m.Party, party_ids=st.lists(party_ids, min_size=1, max_size=3).map(tuple), role=opt_token)
descriptions = st.builds(m.Description, text=token, lang=st.sampled_from(["en", "en-US", "nl", "fr-CA"]))
ids = st.none() | st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,12}", fullmatch=True)

message_data = st.builds(
    m.MessageData,
    message_id=token,
    timestamp=datetimes,
    ref_to_message_id=opt_token,
    time_to_live=st.none() | datetimes,
)
message_headers = st.builds(
    m.MessageHeader,
    from_party=parties,
    to_party=parties,
    cpa_id=token,
    conversation_id=token,
    service=st.builds(m.Service, value=token, type=opt_token),
    action=token,
    message_data=message_data,
    duplicate_elimination=st.booleans(),
    descriptions=st.lists(descriptions, max_size=2).map(tuple),
    id=ids,
    extensions=extensions,
)
ack_requested = st.lists(
    st.builds(m.AckRequested, signed=st.booleans(), actor=st.sampled_from([ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH])),
    max_size=2,
    unique_by=lambda a: a.actor,
).map(tuple)
acknowledgments = st.lists(
    st.builds(
        m.Acknowledgment,
        timestamp=datetimes,
        ref_to_message_id=token,
        from_party=st.none() | parties,
        actor=st.sampled_from([ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH]),
    ),
    max_size=2,
).map(tuple)
errors = st.builds(
    m.Error,
    error_code=st.sampled_from(["ValueNotRecognized", "Inconsistent", "OtherXml", "DeliveryFailure"]),
    severity=st.sampled_from(list(Severity)),
    location=opt_token,
    description=st.none() | descriptions,
)
error_lists = st.builds(
    m.ErrorList,
    errors=st.lists(errors, min_size=1, max_size=3).map(tuple),
    highest_severity=st.sampled_from(list(Severity)),
)
references = st.builds(
    m.Reference,
    href=st.from_regex(r"cid:[A-Za-z0-9.\-]{1,20}@[a-z]{1,10}", fullmatch=True),
    role=st.none() | uri,
    schemas=st.lists(st.builds(m.Schema, location=uri, version=opt_token), max_size=2).map(tuple),
    descriptions=st.lists(descriptions, max_size=2).map(tuple),
)
manifests = st.builds(
    m.Manifest,
    references=st.lists(references, min_size=1, max_size=3, unique_by=lambda r: r.href).map(tuple),
)

envelopes = st.builds(
    m.Envelope,
    message_header=message_headers,
    sync_reply=st.none() | st.just(m.SyncReply()),
    message_order=st.none()
    | st.builds(
        m.MessageOrder, sequence_number=st.integers(0, 99999999), status=st.sampled_from(list(m.SequenceStatus))
    ),
    ack_requested=ack_requested,
    acknowledgments=acknowledgments,
    error_list=st.none() | error_lists,
    manifest=st.none() | manifests,
    status_request=st.none() | st.builds(m.StatusRequest, ref_to_message_id=token),
    status_response=st.none()
    | st.builds(
        m.StatusResponse,
        ref_to_message_id=token,
        message_status=st.sampled_from(list(m.MessageStatus)),
        timestamp=st.none() | datetimes,
    ),
    header_extensions=st.builds(m.Extensions, elements=st.lists(foreign_elements(), max_size=2).map(tuple)),
)
