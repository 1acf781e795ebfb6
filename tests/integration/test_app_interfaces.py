"""The application interfaces of real ``msh serve`` processes on loopback (free ports picked at run time):
an application that crashes and retries at random points submits through A's REST interface, another
takes the messages from B's REST inbox; every message reaches the receiving application exactly once.
The long form (1,000 messages) is ``python -m msh.faults.app_e2e run --count 1000``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
import zeep
from zeep.transports import Transport

from msh.faults.app_e2e import TOKEN, run_app_e2e
from msh.faults.pair import ACTION, PARTY_B, SERVICE, free_port, make_pair


def test_crashing_applications_exchange_every_message_exactly_once(tmp_path: Path) -> None:
    report = run_app_e2e(tmp_path / "e2e", count=120, crash=0.08, seed=5, timeout=300)
    assert report.ok, report.summary()
    assert report.sender_starts > 1, report.summary()  # the crashes did happen


def test_msh_serve_serves_the_interfaces_and_refuses_a_missing_token(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False)
    port = free_port()
    partner = pair.a
    partner.env.update(
        {"MSH_API_ENABLED": "true", "MSH_API_PORT": str(port), "MSH_API_APPLICATIONS": "erp=env:NO_SUCH"}
    )
    with pytest.raises(Exception, match="NO_SUCH, which is not set"):
        partner.start(timeout=30)
    partner.env.update({"MSH_API_APPLICATIONS": "erp=env:E2E_TOKEN", "E2E_TOKEN": TOKEN})
    partner.start()
    try:
        log = partner.log.read_text()
        assert f"application interfaces at http://127.0.0.1:{port}/api" in log
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/openapi.json", timeout=10) as r:
            assert json.loads(r.read())["openapi"].startswith("3.1")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/messages", method="OPTIONS", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.headers["SOARITY"] == "supported"
        # a WSDL-driven application: zeep builds its client from the WSDL the process serves
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        client = zeep.Client(f"http://127.0.0.1:{port}/api/soap?wsdl", transport=Transport(session=session))
        sent = client.service.Send(
            requestId="urn:uuid:integration-1",
            msgCreate=datetime.now(UTC).replace(microsecond=0),
            to={"partyId": PARTY_B[0], "type": PARTY_B[1]},
            service=SERVICE,
            action=ACTION,
            payload=[{"contentType": "application/xml", "data": b"<order/>"}],
        )
        assert client.service.GetStatus(messageId=sent.messageId).messageId == sent.messageId
        assert client.service.ListInbox() == []
        assert TOKEN not in partner.log.read_text()  # never printed
    finally:
        partner.stop()
    assert "msh: stopped" in partner.log.read_text()


def test_mutual_tls_names_the_application_by_its_certificate(tmp_path: Path) -> None:
    """api.tls with api.client_ca: HTTPS, and a client certificate from those CAs authenticates the
    application its subject CN names; without one the TLS handshake is refused."""
    import ssl

    keys = Path(__file__).resolve().parents[2] / "samples" / "keys"
    pair = make_pair(tmp_path / "pair", proxy=False)
    port = free_port()
    partner = pair.b
    partner.env.update(
        {
            "MSH_API_ENABLED": "true",
            "MSH_API_PORT": str(port),
            "MSH_API_TLS": "true",
            "MSH_API_CLIENT_CA": str(keys / "party-a.cert.pem"),  # A's self-signed certificate is its own CA
        }
    )
    partner.start()
    try:
        context = ssl.create_default_context(cafile=str(keys / "party-b.cert.pem"))
        context.load_cert_chain(str(keys / "party-a.cert.pem"), str(keys / "party-a.key.pem"))
        url = f"https://127.0.0.1:{port}/api/inbox?view=all"
        with urllib.request.urlopen(url, context=context, timeout=10) as r:
            assert r.status == 200 and json.loads(r.read()) == {"items": []}
        anonymous = ssl.create_default_context(cafile=str(keys / "party-b.cert.pem"))
        with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
            urllib.request.urlopen(url, context=anonymous, timeout=10).read()
    finally:
        partner.stop()
