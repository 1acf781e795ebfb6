"""The CPA registry: add/replace/remove, lookups by CPAId and by route, and lock-free reads."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

from cpa.model import PartyId, Status
from cpa.registry import CpaRegistry
from cpa.reliable_messaging_method import ReliableMessagingMethod
from cpa.resolve import Exchange
from msh.ebms import model as m
from tests.support.cpa_factory import A_ID, B_ID, END, NOW, SERVICE, make_cpa


def ids(cpas: tuple[object, ...]) -> list[str]:
    return [c.cpaid for c in cpas]  # type: ignore[attr-defined]


def test_add_get_len_iter_contains() -> None:
    registry = CpaRegistry()
    assert len(registry) == 0 and registry.get("cpa-a-b") is None
    first, second = make_cpa(), make_cpa(cpaid="cpa-2")
    registry.add(first)
    registry.add(second)
    assert len(registry) == 2
    assert registry.get("cpa-a-b") is first and registry.get("cpa-2") is second
    assert "cpa-2" in registry and "cpa-3" not in registry
    assert [c.cpaid for c in registry] == ["cpa-a-b", "cpa-2"]


def test_add_replaces_the_same_cpaid() -> None:
    registry = CpaRegistry([make_cpa()])
    renewed = make_cpa(a_ids=(PartyId("111", "urn:duns"),))
    registry.add(renewed)
    assert len(registry) == 1 and registry.get("cpa-a-b") is renewed
    # The old agreement's routes are gone, the new one's are there.
    assert registry.find(A_ID, B_ID, SERVICE, "NewOrder") == ()
    assert registry.find(PartyId("111", "urn:duns"), B_ID, SERVICE, "NewOrder") == (renewed,)


def test_remove() -> None:
    cpa = make_cpa()
    registry = CpaRegistry([cpa, make_cpa(cpaid="cpa-2")])
    assert registry.remove("cpa-a-b") is cpa
    assert registry.remove("cpa-a-b") is None
    assert registry.get("cpa-a-b") is None and len(registry) == 1
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == ["cpa-2"]
    registry.remove("cpa-2")
    assert registry.find(A_ID, B_ID, SERVICE, "NewOrder") == ()


def test_find_by_direction_service_and_action() -> None:
    cpa = make_cpa()
    registry = CpaRegistry([cpa])
    assert registry.find(A_ID, B_ID, SERVICE, "NewOrder") == (cpa,)
    assert registry.find(B_ID, A_ID, SERVICE, "OrderResponse") == (cpa,)
    # Wrong direction, unknown action or service, unknown party: nothing.
    assert registry.find(B_ID, A_ID, SERVICE, "NewOrder") == ()
    assert registry.find(A_ID, B_ID, SERVICE, "OrderResponse") == ()
    assert registry.find(A_ID, B_ID, "urn:other", "NewOrder") == ()
    assert registry.find(PartyId("123456789"), B_ID, SERVICE, "NewOrder") == ()  # type is part of the id


def test_find_needs_can_receive_on_the_to_side() -> None:
    registry = CpaRegistry([make_cpa(b_receives=())])
    assert registry.find(A_ID, B_ID, SERVICE, "NewOrder") == ()


def test_find_accepts_header_parties_and_pairs_and_any_of_several_ids() -> None:
    cpa = make_cpa(a_ids=(A_ID, PartyId("urn:alpha")))
    registry = CpaRegistry([cpa])
    header_from = m.Party((m.PartyId("nobody", "x"), m.PartyId("urn:alpha")), "Buyer")
    assert registry.find(header_from, ("987654321", "urn:duns"), SERVICE, "NewOrder") == (cpa,)
    assert registry.find([("urn:alpha", None)], [B_ID], SERVICE, "NewOrder") == (cpa,)


def test_find_filters_by_service_type() -> None:
    typed = make_cpa(cpaid="typed", service_type="urn:types:t")
    plain = make_cpa(cpaid="plain")
    registry = CpaRegistry([typed, plain])
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == ["typed", "plain"]
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder", "urn:types:t")) == ["typed"]
    assert registry.find(A_ID, B_ID, SERVICE, "NewOrder", "urn:types:none") == ()


def test_find_with_now_keeps_agreements_in_force() -> None:
    registry = CpaRegistry(
        [
            make_cpa(cpaid="current"),
            make_cpa(cpaid="expired", end=NOW),
            make_cpa(cpaid="proposed", status=Status.PROPOSED),
            make_cpa(cpaid="signed", status=Status.SIGNED),
            make_cpa(cpaid="future", start=NOW + timedelta(seconds=1), end=END),
        ]
    )
    assert len(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == 5
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder", now=NOW)) == ["current", "signed"]


def test_add_all_publishes_a_batch_and_a_later_duplicate_wins() -> None:
    registry = CpaRegistry()
    one, two, one_again = make_cpa(cpaid="1"), make_cpa(cpaid="2"), make_cpa(cpaid="1", retries=9)
    registry.add_all([one, two, one_again])
    assert len(registry) == 2 and registry.get("1") is one_again
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == ["1", "2"]
    registry.add_all([])
    assert len(registry) == 2


def test_iteration_is_a_snapshot() -> None:
    registry = CpaRegistry([make_cpa(cpaid=str(i)) for i in range(3)])
    seen = []
    for cpa in registry:
        seen.append(cpa.cpaid)
        registry.add(make_cpa(cpaid=f"new-{cpa.cpaid}"))
        registry.remove(cpa.cpaid)
    assert seen == ["0", "1", "2"]
    assert sorted(c.cpaid for c in registry) == ["new-0", "new-1", "new-2"]


def test_readers_never_see_a_half_published_state() -> None:
    """Writers add and remove while readers look up: every answer is consistent, nothing raises."""
    base = make_cpa()
    registry = CpaRegistry([base])
    agreements = [replace(base, cpaid=f"cpa-{i}") for i in range(300)]
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            found = registry.find(A_ID, B_ID, SERVICE, "NewOrder")
            if not found or found[0] is not base:
                errors.append(f"base agreement missing from find(): {ids(found)[:3]}")
            if len({c.cpaid for c in found}) != len(found):
                errors.append("an agreement was returned twice")
            for cpa in found:
                got = registry.get(cpa.cpaid)
                if got is not None and got.cpaid != cpa.cpaid:
                    errors.append("get() returned another agreement")
            if registry.get("cpa-a-b") is not base:
                errors.append("get() lost the base agreement")

    def writer() -> None:
        for cpa in agreements:
            registry.add(cpa)
        for cpa in agreements[::2]:
            registry.remove(cpa.cpaid)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    writers = [threading.Thread(target=writer) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert len(registry) == 151
    assert len(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == 151


def test_replace_all_takes_the_other_set_in_one_step() -> None:
    kept, gone = make_cpa(), make_cpa(cpaid="cpa-gone")
    registry = CpaRegistry([kept, gone], first_resend_timeouts={"old": timedelta(seconds=1)})
    seen_before = iter(registry)  # a reader's snapshot is not disturbed by the replacement
    added = make_cpa(cpaid="cpa-new")
    registry.replace_all(CpaRegistry([kept, added], first_resend_timeouts={"new": timedelta(seconds=2)}))
    assert ids(tuple(registry)) == ["cpa-a-b", "cpa-new"] and registry.get("cpa-gone") is None
    assert ids(registry.find(A_ID, B_ID, SERVICE, "NewOrder")) == ["cpa-a-b", "cpa-new"]
    assert dict(registry.first_resend_timeouts) == {"new": timedelta(seconds=2)}
    assert ids(tuple(seen_before)) == ["cpa-a-b", "cpa-gone"]


def test_the_reliable_messaging_methods_of_the_channels_go_to_every_resolve_and_are_replaced_together() -> None:
    # The Reliable Messaging draft's ReliableMessagingMethod: a setting of the MSH per sending channel.
    order = Exchange(A_ID, B_ID, SERVICE, "NewOrder")
    registry = CpaRegistry([make_cpa()], reliable_messaging_methods={"A_channel": ReliableMessagingMethod.TRANSPORT})
    assert registry.resolve("cpa-a-b", order, now=NOW).reliable_messaging_method is ReliableMessagingMethod.TRANSPORT
    registry.replace_all(CpaRegistry([make_cpa()]))
    assert dict(registry.reliable_messaging_methods) == {}
    assert registry.resolve("cpa-a-b", order, now=NOW).reliable_messaging_method is ReliableMessagingMethod.EBXML
