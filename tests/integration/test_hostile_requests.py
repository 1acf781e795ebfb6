"""Hostile requests (:mod:`msh.faults.hostile`) are answered as documented, and while they are processed
the server keeps answering others: health checks on other connections and a valid message.

Nothing here asserts on time: the test checks what the server answered, and that it answered the health
checks sent while the hostile requests were in flight. ``scripts/bench_hostile.py`` measures the latencies.
"""

from __future__ import annotations

import http.client
import threading

import pytest

from msh.ebms.message import ParseMode, parse_message
from msh.faults.hostile import HostileRequest, hostile_requests
from tests.support.endpoint import RunningMsh, valid_message

TIMEOUT = 120.0
SOAP_CT = 'text/xml; charset="UTF-8"'


def post(b: RunningMsh, request: HostileRequest | tuple[str, bytes]) -> tuple[int, str | None, bytes]:
    content_type, body = (request.content_type, request.body) if isinstance(request, HostileRequest) else request
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/msh", body=body, headers={"Content-Type": content_type, "SOAPAction": '"ebXML"'})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def health(b: RunningMsh) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=TIMEOUT)
    try:
        conn.request("GET", "/msh")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("request_", hostile_requests(), ids=lambda r: r.name)
def test_each_hostile_request_gets_a_documented_answer(party_b: RunningMsh, request_: HostileRequest) -> None:
    status, content_type, body = post(party_b, request_)
    if status == 202:  # refused by the checks, the ErrorList going asynchronously (the header asks no SyncReply)
        assert not request_.refused and body == b""
        assert party_b.msh.inbox(None) == []
        return
    assert content_type == SOAP_CT, (status, body[:300])
    envelope = parse_message(body, content_type, mode=ParseMode.STRICT).envelope
    if status == 500:
        assert envelope.fault is not None and envelope.fault.faultcode == "SOAP:Client"
    else:
        assert status == 200 and envelope.error_list is not None  # refused by the checks, with its reasons
    assert party_b.msh.inbox(None) == []


def test_the_server_answers_others_while_hostile_requests_are_processed(party_b: RunningMsh) -> None:
    requests = hostile_requests()
    answers: list[int] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def attack() -> None:
        try:
            for _round in range(3):
                for request in requests:
                    answers.append(post(party_b, request)[0])
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()

    attacker = threading.Thread(target=attack, name="attacker", daemon=True)
    attacker.start()
    checks: list[int] = []
    while not done.is_set() and len(checks) < 10_000:
        checks.append(health(party_b))
    attacker.join(TIMEOUT)
    assert not failures, failures
    assert len(answers) == 3 * len(requests)
    assert set(answers) <= {200, 202, 500}
    assert checks and set(checks) == {200}, checks[:20]
    content_type, body = valid_message(party_b.msh, "after-hostile@party-a.example")
    status, _, reply = post(party_b, (content_type, body))
    assert status == 200 and b"Acknowledgment" in reply
    assert [e.message_id for e in party_b.msh.inbox(None)] == ["after-hostile@party-a.example"]
