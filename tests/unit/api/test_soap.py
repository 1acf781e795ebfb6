"""The SOAP 1.1 interface, driven by zeep: the client is built from the WSDL the MSH serves, and calls the
operations with the semantics of the REST interface (exactly-once Send, inbox take and settlement)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import zeep
from lxml import etree
from zeep.exceptions import Fault
from zeep.transports import AsyncTransport

from msh.api.soap import SOAP_ENV, TNS
from tests.unit.api.conftest import AUTH, OTHER, PARTY_B, Apis, on_apis

SOAP = "/api/soap"


async def _client(t: Apis, which: str, tmp: Path, headers: dict[str, str] = AUTH) -> zeep.AsyncClient:
    api = t.api_a if which == "a" else t.api_b
    served = await api.get(SOAP, params={"wsdl": ""})
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/xml")
    path = tmp / f"{which}.wsdl"
    path.write_bytes(served.content)
    client = httpx.AsyncClient(transport=api._transport, base_url=str(api.base_url))
    transport = AsyncTransport(client=client)
    transport.client.headers.update(headers)  # AsyncTransport sets the client's headers: add ours after
    return zeep.AsyncClient(str(path), transport=transport)


def _order(n: int) -> dict[str, object]:
    return {
        "to": {"partyId": PARTY_B["partyId"], "type": PARTY_B["type"]},
        "service": "urn:example:services:ordering",
        "action": "NewOrder",
        "payload": [{"contentType": "application/xml", "data": f"<order n='{n}'/>".encode()}],
    }


def test_send_is_exactly_once_and_the_inbox_is_taken_and_confirmed(tmp_path: Path) -> None:
    async def scenario(t: Apis) -> None:
        a = await _client(t, "a", tmp_path)
        b = await _client(t, "b", tmp_path)
        created = t.now
        first = await a.service.Send(requestId="urn:uuid:soap-1", msgCreate=created, **_order(1))
        again = await a.service.Send(requestId="urn:uuid:soap-1", msgCreate=created, **_order(1))
        assert first.messageId == again.messageId and first.status == "pending"
        with pytest.raises(Fault) as refused:
            await a.service.Send(requestId="urn:uuid:soap-1", msgCreate=created - timedelta(seconds=5), **_order(1))
        assert "first sent with MsgCreate" in refused.value.message
        problem = refused.value.detail.find(f"{{{TNS}}}Problem")
        assert problem.findtext(f"{{{TNS}}}status") == "403"
        assert problem.findtext(f"{{{TNS}}}soarity") == "MsgCreate/Message-ID Rejected"
        with pytest.raises(Fault) as different:
            await a.service.Send(requestId="urn:uuid:soap-1", msgCreate=created, **_order(2))
        assert different.value.detail.find(f"{{{TNS}}}Problem").findtext(f"{{{TNS}}}status") == "400"
        await t.net.settle()
        status = await a.service.GetStatus(messageId=first.messageId)
        assert (status.status, status.final, status.attempts) == ("delivered", True, 1)
        assert status.acknowledgedAt is not None
        items = await b.service.ListInbox(waitSeconds=1)
        assert [i.messageId for i in items] == [first.messageId]
        fetched = await b.service.FetchMessage(entryId=items[0].entryId)
        assert fetched.item.state == "leased" and fetched.payload[0].data == b"<order n='1'/>"
        confirmed = await b.service.Confirm(entryId=items[0].entryId)
        assert confirmed.state == "acknowledged"
        assert await b.service.ListInbox() == []
        with pytest.raises(Fault) as gone:
            await b.service.FetchMessage(entryId=items[0].entryId)
        assert gone.value.code.endswith("Client")

    on_apis(scenario)


def test_release_reject_browse_and_other_applications(tmp_path: Path) -> None:
    async def scenario(t: Apis) -> None:
        first, second = await t.deliver(2)
        b = await _client(t, "b", tmp_path)
        other = await _client(t, "b", tmp_path, OTHER)
        browsed = await b.service.FetchMessage(entryId=first, browse=True)
        assert browsed.item.state == "available" and browsed.item.takes == 0
        await b.service.FetchMessage(entryId=first)
        with pytest.raises(Fault, match="leased by another application"):
            await other.service.Confirm(entryId=first)
        assert (await b.service.Release(entryId=first)).state == "available"
        rejected = await other.service.Reject(entryId=second, reason="no such customer")
        assert rejected.state == "rejected"
        dead = await b.service.ListInbox(view="dead")
        assert [(i.entryId, i.rejectedReason) for i in dead] == [(second, "no such customer")]
        with pytest.raises(Fault, match="view 'nope'"):
            await b.service.ListInbox(view="nope")

    on_apis(scenario)


def test_bad_envelopes_get_client_faults_never_tracebacks() -> None:
    async def scenario(t: Apis) -> None:
        def envelope(body: str) -> bytes:
            return f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:t="{TNS}"><s:Body>{body}</s:Body></s:Envelope>'.encode()

        cases = [
            (b"not xml", "not a usable XML document"),
            (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "e">]><x/>', "not a usable XML document"),
            (b"<x/>", "not a SOAP 1.1 Envelope"),
            (envelope(""), "Body is empty"),
            (envelope("<t:Nope/>"), "unknown operation"),
            (envelope("<t:GetStatus><t:wrong/></t:GetStatus>"), "does not follow the WSDL's schema"),
            (envelope("<t:FetchMessage><t:entryId>x</t:entryId></t:FetchMessage>"), "does not follow"),
        ]
        for body, says in cases:
            r = await t.api_b.post(SOAP, content=body, headers={**AUTH, "Content-Type": "text/xml"})
            assert r.status_code == 500
            fault = etree.fromstring(r.content).find(f".//{{{SOAP_ENV}}}Fault")
            assert fault is not None and fault.findtext("faultcode") == "soap:Client"
            assert says in fault.findtext("faultstring"), (body, fault.findtext("faultstring"))
        ok = envelope("<t:GetStatus><t:messageId>x</t:messageId></t:GetStatus>")
        r = await t.api_b.post(SOAP, content=ok, headers={"Content-Type": "text/xml"})
        assert "Bearer" in r.text and r.status_code == 500  # no credential
        assert (await t.api_b.get(SOAP)).status_code == 500  # not ?wsdl

    on_apis(scenario)
