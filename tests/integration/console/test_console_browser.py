"""The web console in headless Chromium, at 1280 px and on a phone: the dashboard, a search, a message's
history and payloads, a resend and the inbox actions, each checked by what the page then shows."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from msh.console import message_list
from tests.integration.console.conftest import Site
from tests.integration.console.scenario import ORDERS, PARTY_A, PARTY_B, RESPONSES


def _text(site: Site, selector: str) -> str:
    return str(site.page.locator(selector).inner_text())


def _card(site: Site, label: str) -> str:
    card = site.page.locator(".card", has=site.page.locator(".l", has_text=re.compile(f"^{label}$")))
    return str(card.locator(".n").inner_text())


def test_dashboard_shows_counts_charts_and_partners(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/")
    assert page.locator("h1").inner_text() == "Dashboard"
    assert _card(site, "delivered") == str(ORDERS)
    assert _card(site, "failed") == "1"
    assert _card(site, "inbox available") == str(RESPONSES)
    assert page.locator("svg.chart").count() == 3  # traffic, failures, latency: drawn on the server
    assert page.locator("svg.chart circle").count() > 0
    row = page.locator("#partners tbody tr", has_text=PARTY_B)
    cells = row.locator("td").all_inner_texts()
    # sent, delivered, failed, received for partner B over the last day
    assert cells[1:5] == [str(ORDERS + 1), str(ORDERS), "1", str(RESPONSES)]
    assert page.locator("#partners tbody tr", has_text=PARTY_B).count() == 1
    assert page.locator("#partners tbody tr", has_text=PARTY_B).locator("td").nth(5).inner_text() != "—"
    site.shot("dashboard")
    page.goto(site.url + "/?span=1h")
    assert page.locator(".chip.on").inner_text() == "1h"


def test_search_finds_the_failed_message(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/messages")
    assert page.locator("#messages tbody tr").count() == ORDERS + 1 + RESPONSES
    page.select_option("select[name=direction]", "out")
    page.select_option("select[name=status]", "failed")
    page.fill("input[name=partner]", PARTY_B)
    page.locator("#filters button").click()
    page.wait_for_url(re.compile(r"status=failed"))
    rows = page.locator("#messages tbody tr")
    assert rows.count() == 1
    assert site.traffic.failed in rows.first.inner_text()
    assert "failed" in rows.first.locator(".badge").inner_text()
    site.shot("messages")
    page.goto(site.url + "/messages?direction=in")
    assert page.locator("#messages tbody tr").count() == RESPONSES
    assert PARTY_B in page.locator("#messages tbody").inner_text()
    page.goto(site.url + "/messages?status=nonsense")
    assert "is not one of" in page.locator(".flash-refused").first.inner_text()


def test_message_history_and_payload_download(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/messages?status=failed")
    page.locator("#messages a", has_text=site.traffic.failed).click()
    page.wait_for_url(re.compile(re.escape(quote(site.traffic.failed, safe="")) + "|" + re.escape(site.traffic.failed)))
    assert page.locator("#message-id").inner_text() == site.traffic.failed
    assert page.locator("#status").inner_text() == "failed"
    kinds = page.locator("#history .kind").all_inner_texts()
    assert kinds[0] == "submitted"
    assert kinds.count("transmission") == 6  # Retries 5 in the agreement: the first sending and five resends
    assert kinds.index("failed") > kinds.index("transmission")
    assert "connection refused" in page.locator("#attempts").inner_text()
    site.shot("message")
    link = page.locator(".payloads a").first
    assert link.inner_text() == "neworder-99.xml"
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.suggested_filename == "neworder-99.xml"
    assert b"<NewOrder n='99'>" in Path(download.path()).read_bytes()
    answer = page.request.get(site.url + "/payloads/out/0?message=" + quote(site.traffic.failed, safe=""))
    assert answer.headers["content-type"].startswith("application/xml")
    assert answer.headers["content-disposition"] == 'attachment; filename="neworder-99.xml"'


def test_resend_of_a_failed_message_and_refusal_of_a_delivered_one(site: Site) -> None:
    page = site.page
    failed = site.traffic.failed
    page.goto(site.url + "/messages/" + quote(failed, safe=""))
    page.fill("#resend input[name=reason]", "partner B is back up")
    page.locator("#resend button").click()
    assert "resent" in page.locator(".flash-ok").inner_text()
    assert page.locator("#status").inner_text() != "failed"
    kinds = page.locator("#history .kind").all_inner_texts()
    assert "resend-requested" in kinds
    assert "partner B is back up" in page.locator("#history").inner_text()
    site.shot("resend")
    delivered = site.traffic.delivered[0]
    page.goto(site.url + "/messages/" + quote(delivered, safe=""))
    page.fill("#resend input[name=reason]", "just to see")
    page.locator("#resend button").click()
    refusal = page.locator(".flash-refused").inner_text()
    assert "not resent" in refusal and "delivered, not failed" in refusal
    assert page.locator("#status").inner_text() == "delivered"


def test_inbox_actions(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/inbox")
    rows = page.locator("#inbox tbody tr")
    assert rows.count() == RESPONSES
    first, second = rows.nth(0), rows.nth(1)
    first_id, second_id = first.locator("td").first.inner_text(), second.locator("td").first.inner_text()
    site.shot("inbox")
    first.locator("form.reject input[name=reason]").fill("wrong price list")
    first.locator("form.reject button").click()
    assert f"inbox entry {first_id}" in page.locator(".flash-ok").inner_text()
    assert "rejected" in page.locator(".flash-ok").inner_text()
    assert page.locator("#inbox tbody tr").count() == RESPONSES - 1
    page.locator(f"#entry-{second_id} button[value=ack]").click()
    assert "acknowledged" in page.locator(".flash-ok").inner_text()
    page.goto(site.url + "/inbox?view=dead")
    dead = page.locator("#inbox tbody tr")
    assert dead.count() == 1 and "wrong price list" in dead.inner_text()
    dead.locator("button[value=release]").click()  # settled: the release is refused, with the reason
    assert "not released" in page.locator(".flash-refused").inner_text()
    page.goto(site.url + "/messages?direction=in&status=rejected")
    assert page.locator("#messages tbody tr").count() == 1
    page.locator("#messages tbody a").first.click()
    assert page.locator("#inbox-state .badge").inner_text() == "rejected"
    assert "app-rejected" in page.locator("#history .kind").all_inner_texts()


def test_agreements_routing_and_settings(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/agreements")
    agreement = page.locator("section.agreement").first
    assert "cpa-demo-a-b" in agreement.locator("h2").inner_text()
    assert "in force" in agreement.locator("h2").inner_text()
    assert "https://127.0.0.1:8082/msh" in agreement.inner_text()
    assert "CN=Party B (pymsh demo)" in agreement.inner_text()
    assert "days left" in agreement.inner_text()
    assert "No routes" in page.locator("#routes").inner_text()
    site.shot("agreements")
    page.goto(site.url + "/settings")
    assert PARTY_A in page.locator("table.settings").first.inner_text()
    assert "a.sqlite" in page.locator("#s-store + .scroll").inner_text()
    site.shot("settings")


def test_forms_refuse_without_the_session_token(site: Site) -> None:
    page = site.page
    page.goto(site.url + "/inbox")
    cookie = next(c for c in page.context.cookies() if c["name"] == "msh_console")
    assert cookie["sameSite"] == "Strict" and cookie["httpOnly"]
    entry = page.locator("#inbox tbody tr").first.locator("td").first.inner_text()
    forged = page.request.post(site.url + "/actions/inbox", form={"entry": entry, "op": "ack", "csrf": "forged"})
    assert forged.status == 403 and "security token" in forged.text()
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    other = page.request.post(
        site.url + "/actions/inbox",
        form={"entry": entry, "op": "ack", "csrf": token},
        headers={"Origin": "https://evil.example"},
    )
    assert other.status == 403 and "evil.example" in other.text()
    page.goto(site.url + "/inbox")
    assert entry in page.locator("#inbox tbody").inner_text()  # still waiting: nothing was acknowledged


def test_paging_goes_older_and_back_newer(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(message_list, "PAGE", 4)
    page = site.page
    page.goto(site.url + "/messages?direction=out")
    ids = lambda: page.locator("#messages tbody a").all_inner_texts()  # noqa: E731
    first = ids()
    assert len(first) == 4 and "Newer" not in page.locator(".pager").inner_text()
    page.locator("a[rel=next]").click()
    second = ids()
    assert len(second) == 4 and not set(first) & set(second)
    page.locator("a[rel=next]").click()
    third = ids()
    assert len(third) == ORDERS + 1 - 8 and page.locator("a[rel=next]").count() == 0
    page.locator("a[rel=prev]").click()
    assert ids() == second
    page.locator("a[rel=prev]").click()
    assert ids() == first
    assert "page 1" in page.locator("main").inner_text()


def test_no_page_is_wider_than_the_screen(site: Site) -> None:
    page = site.page
    message = "/messages/" + quote(site.traffic.delivered[0], safe="")
    for path in ("/", "/messages", message, "/inbox", "/agreements", "/settings"):
        page.goto(site.url + path)
        width, screen = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= screen, f"{path} is {width} px wide on a {screen} px screen"
