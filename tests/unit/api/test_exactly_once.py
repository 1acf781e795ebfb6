"""Exactly-once submission through REST (SOA-Rity for HTTP, Certified HTTP): every rule, on the
test network with its fake clock."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from msh.api import soarity
from msh.store.api import OutboundKind
from tests.unit.api.conftest import AUTH, OTHER, Apis, on_apis, order, pair

URL = "/api/messages"


async def _sent(t: Apis) -> int:
    """How many messages A has committed for sending."""
    with t.a.store.transaction(readonly=True) as tx:
        return len(tx.list_outbound(kind=OutboundKind.OWN, limit=1000))


def test_a_repeat_gets_the_same_response_and_submits_nothing() -> None:
    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:6f1c", t.now)}
        first = await t.api_a.post(URL, json=order(1), headers=headers)
        assert first.status_code == 201
        assert first.headers[soarity.SOARITY] == soarity.SUPPORTED
        assert first.headers["Vary"] == "Message-ID, MsgCreate"
        await t.advance(30)  # retried later, with the same MsgCreate
        again = await t.api_a.post(URL, json=order(1), headers=headers)
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert again.headers[soarity.SOARITY] == soarity.SUPPORTED
        assert again.headers["Location"] == first.headers["Location"]
        assert await _sent(t) == 1
        await t.net.settle()
        inbox = (await t.api_b.get("/api/inbox", headers=AUTH)).json()["items"]
        assert [i["messageId"] for i in inbox] == [first.json()["messageId"]]

    on_apis(scenario)


def test_key_order_and_spacing_of_the_json_do_not_make_a_request_different() -> None:
    async def scenario(t: Apis) -> None:
        import json

        headers = {**AUTH, **pair("urn:uuid:keys", t.now), "Content-Type": "application/json"}
        body = order(1)
        first = await t.api_a.post(URL, content=json.dumps(body), headers=headers)
        again = await t.api_a.post(URL, content=json.dumps(dict(reversed(body.items())), indent=2), headers=headers)
        assert (again.status_code, again.content) == (201, first.content)
        assert await _sent(t) == 1

    on_apis(scenario)


def test_a_known_message_id_with_another_msg_create_is_rejected() -> None:
    async def scenario(t: Apis) -> None:
        created = t.now
        assert (
            await t.api_a.post(URL, json=order(), headers={**AUTH, **pair("urn:uuid:1", created)})
        ).status_code == 201
        other = await t.api_a.post(
            URL, json=order(), headers={**AUTH, **pair("urn:uuid:1", created - timedelta(seconds=1))}
        )
        assert other.status_code == 403
        assert other.headers[soarity.SOARITY] == soarity.REJECTED
        assert other.headers["content-type"] == "application/problem+json"
        assert "first sent with MsgCreate" in other.json()["detail"]
        assert await _sent(t) == 1

    on_apis(scenario)


@pytest.mark.parametrize("offset", [timedelta(days=31), timedelta(minutes=-6)])
def test_a_msg_create_outside_the_time_window_is_rejected(offset: timedelta) -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, json=order(), headers={**AUTH, **pair("urn:uuid:old", t.now - offset)})
        assert r.status_code == 403
        assert r.headers[soarity.SOARITY] == soarity.REJECTED
        assert await _sent(t) == 0

    on_apis(scenario, window="P30D", clock_skew="PT5M")


def test_a_known_pair_outside_the_window_is_rejected_not_repeated() -> None:
    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:late", t.now)}
        assert (await t.api_a.post(URL, json=order(), headers=headers)).status_code == 201
        await t.advance(2 * 3600 + 1)
        r = await t.api_a.post(URL, json=order(), headers=headers)
        assert (r.status_code, r.headers[soarity.SOARITY]) == (403, soarity.REJECTED)
        assert await _sent(t) == 1

    on_apis(scenario, window="PT2H")


def test_the_same_pair_on_a_materially_different_request_is_refused() -> None:
    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:2", t.now)}
        assert (await t.api_a.post(URL, json=order(1), headers=headers)).status_code == 201
        r = await t.api_a.post(URL, json=order(2), headers=headers)
        assert r.status_code == 400
        assert r.json()["type"].endswith("soarity-materially-different")
        assert await _sent(t) == 1
        # headers that are not material (Date, User-Agent) do not matter
        same = await t.api_a.post(URL, json=order(1), headers={**headers, "User-Agent": "x/2", "Date": "now"})
        assert same.status_code == 201

    on_apis(scenario)


def test_a_pair_is_bound_to_the_application_that_sent_it() -> None:
    async def scenario(t: Apis) -> None:
        created = t.now
        first = await t.api_a.post(URL, json=order(), headers={**AUTH, **pair("urn:uuid:3", created)})
        assert first.status_code == 201
        stolen = await t.api_a.post(URL, json=order(), headers={**OTHER, **pair("urn:uuid:3", created)})
        assert stolen.status_code == 403
        assert stolen.headers[soarity.SOARITY] == soarity.REJECTED
        assert first.json()["messageId"] not in stolen.text  # the other application's response is not shown
        assert await _sent(t) == 1

    on_apis(scenario)


def test_options_says_whether_soarity_is_supported() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.options(URL, headers=AUTH)
        assert (r.status_code, r.headers[soarity.SOARITY]) == (204, soarity.SUPPORTED)
        assert "POST" in r.headers["Allow"]
        anonymous = await t.api_a.options(URL)
        assert anonymous.headers[soarity.SOARITY] == soarity.UNSUPPORTED

    on_apis(scenario)


def test_soarity_headers_where_they_are_not_honoured_get_412() -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        r = await t.api_b.post(f"/api/inbox/{entry}/release", headers={**AUTH, **pair("urn:uuid:9", t.now)})
        assert (r.status_code, r.headers[soarity.SOARITY]) == (412, soarity.UNSUPPORTED)

    on_apis(scenario)


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"MsgCreate": "Wed, 25 Nov 2026 10:00:00 GMT"}, "without Message-ID"),
        ({"Message-ID": "not a uri", "MsgCreate": "Wed, 25 Nov 2026 10:00:00 GMT"}, "is not a URI"),
        ({"Message-ID": "urn:uuid:4", "MsgCreate": "2026-11-25T10:00:00Z"}, "not an RFC 1123 date"),
        ({"Message-ID": "urn:uuid:4", "MsgCreate": "Mon, 25 Nov 2026 10:00:00 GMT"}, "is a Wed"),
        ({"Message-ID": "urn:uuid:4", "MsgCreate": "Wed, 31 Feb 2026 10:00:00 GMT"}, "not a valid date"),
    ],
)
def test_unreadable_soarity_headers_get_400(headers: dict[str, str], says: str) -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, json=order(), headers={**AUTH, **headers})
        assert r.status_code == 400
        assert r.headers[soarity.SOARITY] == soarity.SUPPORTED
        assert says in r.json()["detail"]
        assert await _sent(t) == 0

    on_apis(scenario)


def test_message_id_without_msg_create_is_an_ordinary_request() -> None:
    async def scenario(t: Apis) -> None:
        for _ in range(2):
            r = await t.api_a.post(URL, json=order(), headers={**AUTH, "Message-ID": "urn:uuid:5"})
            assert r.status_code == 201 and soarity.SOARITY not in r.headers
        assert await _sent(t) == 2

    on_apis(scenario)


def test_the_pair_is_committed_with_the_submission_or_not_at_all() -> None:
    """Two requests with one pair both see it unknown; only one insert of the pair succeeds, and the
    other's submission is rolled back with it: it answers as a repeat."""

    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:race", t.now)}
        first = await t.api_a.post(URL, json=order(), headers=headers)
        real_read = t.ctx_a.read
        calls = 0

        async def stale_read(fn):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            if calls == 1:
                return None  # as if the other request had not committed yet when this one looked
            return await real_read(fn)

        t.ctx_a.read = stale_read  # type: ignore[method-assign]
        second = await t.api_a.post(URL, json=order(), headers=headers)
        assert calls == 2
        assert (second.status_code, second.content) == (201, first.content)
        assert await _sent(t) == 1  # the second submission did not survive its pair's refusal

    on_apis(scenario)


def test_a_refused_submission_records_no_pair() -> None:
    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:7", t.now)}
        refused = await t.api_a.post(URL, json=order(action="NoSuchAction"), headers=headers)
        assert refused.status_code == 422
        assert "NoSuchAction" in refused.json()["detail"]
        with t.a.store.transaction(readonly=True) as tx:
            assert tx.app_request("urn:uuid:7") is None

    on_apis(scenario)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"to": {"partyId": "x"}}, "service"),
        ({**order(), "payloads": [{"data": "%%%"}]}, "base64"),
        ({**order(), "surprise": 1}, "surprise"),
        ({**order(), "timeToLive": "2026-01-01T00:00:00"}, "time zone"),
    ],
)
def test_bad_requests_are_problems_not_tracebacks(body: dict[str, object], says: str) -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, json=body, headers=AUTH)
        assert r.status_code == 422
        assert r.headers["content-type"] == "application/problem+json"
        assert says in r.text

    on_apis(scenario)


def test_not_json_and_unauthenticated_requests() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
        r = await t.api_a.post(URL, content=b"x", headers={**AUTH, "Content-Type": "text/plain"})
        assert r.status_code == 415
        r = await t.api_a.post(URL, json=order())
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        r = await t.api_a.post(URL, json=order(), headers={"Authorization": "Bearer wrong-token-0123456789"})
        assert r.status_code == 401
        assert await _sent(t) == 0

    on_apis(scenario)


def test_multipart_submission_repeats_with_another_boundary() -> None:
    async def scenario(t: Apis) -> None:
        import json

        message = json.dumps({"to": order()["to"], "service": order()["service"], "action": order()["action"]})
        files = [("payload", ("o.xml", b"<order n='7'/>", "application/xml"))]
        headers = {**AUTH, **pair("urn:uuid:multi", t.now)}
        first = await t.api_a.post(URL, data={"message": message}, files=files, headers=headers)
        assert first.status_code == 201, first.text
        again = await t.api_a.post(URL, data={"message": message}, files=files, headers=headers)  # new boundary
        assert again.content == first.content
        assert await _sent(t) == 1
        await t.net.settle()
        (item,) = (await t.api_b.get("/api/inbox", headers=AUTH)).json()["items"]
        doc = (await t.api_b.get(f"/api/inbox/{item['id']}", params={"format": "json"}, headers=AUTH)).json()
        assert base64.b64decode(doc["payloads"][0]["data"]) == b"<order n='7'/>"

    on_apis(scenario)


def test_the_to_party_type_comes_from_the_agreement_when_not_given() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, json=order(to={"partyId": "987654321"}), headers=AUTH)
        assert r.status_code == 201, r.text
        unknown = await t.api_a.post(URL, json=order(to={"partyId": "555"}), headers=AUTH)
        assert unknown.status_code == 422 and "555" in unknown.json()["detail"]

    on_apis(scenario)


def test_a_request_over_the_limit_is_413_before_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from msh.api import rest_messages

    monkeypatch.setattr(rest_messages, "_MAX_BODY", 100)

    async def scenario(t: Apis) -> None:
        r = await t.api_a.post(URL, json=order(), headers=AUTH)
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"
        assert await _sent(t) == 0

    on_apis(scenario)
