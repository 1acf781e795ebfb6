"""The console's pure pieces: charts, secrets masking, partners, the message filter, the session cookie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from msh.console.actions import operator
from msh.console.charts import Series, line_chart, nice_max
from msh.console.message_list import parse_filters
from msh.console.partners import resolve_partner
from msh.console.session import COOKIE, CsrfRefused, SessionKeys
from msh.console.settings_view import MASK, is_secret, mask
from msh.store.api import Direction

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "whole", "top"),
    [(0, True, 4), (5, True, 8), (3, True, 4), (0.33, False, 0.4), (17, False, 20), (90, True, 100)],
)
def test_axis_tops_are_round(value: float, whole: bool, top: float) -> None:
    assert nice_max(value, whole=whole) == pytest.approx(top)


def test_a_chart_draws_a_point_per_value_with_its_value_and_escapes_names() -> None:
    starts = [T0 + timedelta(hours=h) for h in range(4)]
    svg = str(line_chart("t", starts, [Series("<B>", [1, None, 3, 0])]))
    assert svg.startswith("<svg") and svg.count("<circle") == 3
    assert "&lt;B&gt;, 01 Dec 11:00 UTC: 3" in svg and "<B>" not in svg
    assert "no data" in str(line_chart("t", starts, [Series("b", [None] * 4)]))


def test_secrets_are_masked_and_references_kept() -> None:
    assert mask("postgresql+psycopg://msh:s3cret@db/msh") == f"postgresql+psycopg://msh:{MASK}@db/msh"
    assert (
        mask('["erp=https://erp.example.com/hook?token=abc123"]')
        == f'["erp=https://erp.example.com/hook?token={MASK}"]'
    )
    assert mask('["erp=env:ERP_API_TOKEN"]') == '["erp=env:ERP_API_TOKEN"]'
    assert is_secret("token") and is_secret("admin_password") and is_secret("tokens")
    assert not is_secret("key_passphrase_env") and not is_secret("applications") and not is_secret("signing_key")


def test_a_partner_given_by_its_bare_value_is_found_with_its_type() -> None:
    known = {"urn:x:0088:987654321": "Party B (987654321)", "123": "Party A (123)"}
    assert resolve_partner("987654321", known) == "urn:x:0088:987654321"
    assert resolve_partner("urn:x:0088:987654321", known) == "urn:x:0088:987654321"
    assert resolve_partner("nobody", known) == "nobody"


def test_the_filter_is_read_from_the_query_and_bad_values_are_reported() -> None:
    good = parse_filters(QueryParams("direction=out&status=failed&since=2026-12-01T09:00&service=s"), None)
    assert good.problems == ()
    assert good.query.direction is Direction.OUTBOUND and good.query.status == "failed"
    assert good.query.since == T0 and good.query.service == "s" and good.query.partner is None
    bad = parse_filters(QueryParams("direction=up&status=available&until=yesterday"), "c")
    assert len(bad.problems) == 2 and bad.query.direction is None and bad.query.until is None
    assert bad.query.status == "available" and bad.query.cursor == "c"
    mixed = parse_filters(QueryParams("direction=out&status=leased"), None)
    assert "inbound messages only" in mixed.problems[0] and mixed.query.status is None


def _request(cookie: str | None = None, origin: str | None = None) -> Request:
    headers = [(b"host", b"127.0.0.1:8090")]
    if cookie is not None:
        headers.append((b"cookie", f"{COOKIE}={cookie}".encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return Request(
        {"type": "http", "method": "POST", "path": "/", "headers": headers, "scheme": "http", "query_string": b""}
    )


def _cookie(response: Response) -> str:
    header = response.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=strict" in header
    return header.split(";", 1)[0].split("=", 1)[1]


def test_the_session_cookie_keeps_the_token_and_flashes_and_refuses_forgeries() -> None:
    keys = SessionKeys()
    session = keys.load(_request())
    session.flash("ok", "done")
    response = Response()
    keys.save(_request(), response, session)
    value = _cookie(response)
    again = keys.load(_request(value))
    assert again.csrf == session.csrf and [f.text for f in again.take_flashes()] == ["done"]
    again.check(_request(value), session.csrf)
    with pytest.raises(CsrfRefused, match="security token"):
        again.check(_request(value), "forged")
    with pytest.raises(CsrfRefused, match=r"evil\.example"):
        again.check(_request(value, origin="https://evil.example"), session.csrf)
    again.check(_request(value, origin="http://127.0.0.1:8090"), session.csrf)
    forged = value.rsplit(".", 1)[0] + "." + "0" * 64
    assert keys.load(_request(forged)).csrf != session.csrf  # not signed by us: a new session
    assert SessionKeys().load(_request(value)).csrf != session.csrf  # another console's key


def test_the_operator_is_the_one_the_admin_port_authenticated() -> None:
    request = _request()
    assert operator(request) == "console"
    request.scope["state"] = {"operator": "alice"}
    assert operator(request) == "console:alice"
