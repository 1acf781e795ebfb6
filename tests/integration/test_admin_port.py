"""The admin port of real ``msh serve`` processes on loopback: after a real exchange (HTTPS, mutual TLS,
signed messages), ``/metrics`` parsed by the Prometheus client's own parser counts what happened, ``/ready``
is ready, and a request without the operators' token gets 401. Every wait is bounded."""

from __future__ import annotations

import html
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from msh.faults.pair import ACTION, PARTY_B, SERVICE, free_port, make_pair

TOKEN = "ops-token-for-the-integration-test"


def get(url: str, token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls)


def test_metrics_and_readiness_of_two_running_msh(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False, http_timeout="PT2S", first_resend="PT3S", lease="PT10S")
    ports = {"a": free_port(), "b": free_port()}
    for key, partner in (("a", pair.a), ("b", pair.b)):
        partner.env.update(
            {
                "MSH_ADMIN_ENABLED": "true",
                "MSH_ADMIN_PORT": str(ports[key]),
                "MSH_ADMIN_OPERATORS": "ops=env:OPS_TOKEN",
                "OPS_TOKEN": TOKEN,
            }
        )
    try:
        pair.b.start()
        pair.a.start()
        assert f"admin port at http://127.0.0.1:{ports['a']}" in pair.a.log.read_text()
        send = ["send", "--config", str(pair.a.config), "--to", PARTY_B[0], "--service", SERVICE, "--action", ACTION]
        ids = []
        for n in range(2):
            sent = subprocess.run(
                [sys.executable, "-m", "msh.cli", *send, "--wait", "20"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert sent.returncode == 0, (n, sent.stdout + sent.stderr)
            ids.append(sent.stdout.split()[0])
        a_url, b_url = (f"http://127.0.0.1:{ports[k]}" for k in ("a", "b"))
        status, body = get(f"{a_url}/ready")
        assert status == 200, body
        assert json.loads(body)["ready"] is True
        status, text = get(f"{a_url}/metrics")
        assert status == 200
        a = samples(text)
        # msh send committed the messages in its own process; A's server transmitted them and got the acks.
        assert total(a, "msh_messages_sent_total", outcome="delivered") == 2
        assert total(a, "msh_transmissions_total", outcome="acknowledged") == 2
        assert total(a, "msh_store_commit_seconds_count") >= 2
        assert total(a, "msh_agreements_loaded") == 1
        sources = {dict(ls).get("source") for (n, ls) in a if n == "msh_certificate_expiry_days"}
        assert {"tls.certificate", "security.signing_certificate"} <= sources  # the sample keys' certificates
        b = samples(get(f"{b_url}/metrics")[1])
        assert total(b, "msh_messages_received_total") == 2
        assert total(b, "msh_inbox_messages", state="new") == 2
        # The console is mounted at / by msh serve: the dashboard lists the two messages as delivered.
        status, page = get(f"{a_url}/")
        assert status == 200 and "<html" in page.lower()
        status, page = get(f"{a_url}/messages?status=delivered")
        assert status == 200 and all(html.escape(i) in page for i in ids), (ids, page[:500])
        assert get(f"{a_url}/metrics", token=None)[0] == 401
        assert get(f"{a_url}/health", token="wrong-token-of-some-length")[0] == 401
        assert TOKEN not in pair.a.log.read_text()
    finally:
        pair.stop()
    assert "msh: stopped" in pair.a.log.read_text()


def test_a_busy_admin_port_stops_the_start_naming_admin_port(tmp_path: Path) -> None:
    import socket

    pair = make_pair(tmp_path / "pair", proxy=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        pair.a.env.update(
            {
                "MSH_ADMIN_ENABLED": "true",
                "MSH_ADMIN_PORT": str(port),
                "MSH_ADMIN_OPERATORS": "ops=env:OPS_TOKEN",
                "OPS_TOKEN": TOKEN,
            }
        )
        with pytest.raises(Exception, match=rf"admin.host/admin.port: cannot listen on 127.0.0.1:{port}"):
            pair.a.start(timeout=30)
    pair.stop()
