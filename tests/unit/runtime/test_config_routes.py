"""The routing table in the settings (msh.runtime.config.routes): [[routing.routes]] read into Routes, in
order, every problem named by routing.routes[N].key and the file; agreements optional when there are routes."""

from __future__ import annotations

import re
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cpa.duration import XsDuration
from msh.engine.routing import DEFAULT_ROUTE_RETRIES, DEFAULT_ROUTE_RETRY_INTERVAL, Route, find_route
from msh.errors import ConfigurationError
from msh.runtime import config
from msh.runtime.config import (
    AgreementSettings,
    IdentitySettings,
    RouteKeys,
    RoutingSettings,
    ServerSettings,
    Settings,
    SettingsError,
    StoreSettings,
    describe,
    load_settings,
    route_keys_table,
    settings_from_mapping,
)
from tests.support.samples import shown_settings

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples"
CONFIG = SAMPLES / "config"
MULTIHOP = CONFIG / "multihop"
KEYS = SAMPLES / "keys"
ROUTED_CPA = SAMPLES / "cpas" / "demo-routed-a-c.xml"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
A, C, INTERMEDIARY = "123456789", "555555555", "999999999"


def settings(*rows: dict[str, Any], agreements: bool = False, **sections: Any) -> dict[str, Any]:
    """Settings of an intermediary (plain HTTP, memory store) with ``rows`` as its routes."""
    data: dict[str, Any] = {
        "identity": {"party_id": INTERMEDIARY, "party_id_type": TYPE},
        "store": {"url": "memory:"},
        "server": {"tls": False},
        "routing": {"routes": list(rows)},
    }
    if agreements:
        data["agreements"] = {"paths": [str(ROUTED_CPA)]}
    data.update(sections)
    return data


def row(**keys: Any) -> dict[str, Any]:
    """A route to C, with ``keys`` over it (None removes a key)."""
    values: dict[str, Any] = {"to_party_id": C, "next_hop": "https://127.0.0.1:8092/msh", **keys}
    return {k: v for k, v in values.items() if v is not None}


def load(data: dict[str, Any], env: dict[str, str] | None = None) -> Settings:
    return settings_from_mapping(data, base_dir=SAMPLES, source="t.toml", env=env or {})


def problems_of(data: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    """The problems reported, each a line of the one error message (no traceback, one error)."""
    with pytest.raises(SettingsError) as caught:
        load(data, env)
    assert isinstance(caught.value, ConfigurationError)
    count = len(caught.value.problems)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"the MSH settings from t.toml have {count} problem{'' if count == 1 else 's'}:"
    assert lines[1:] == [f"  - {p}" for p in caught.value.problems]
    return list(caught.value.problems)


def one_problem(data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    problems = problems_of(data, env)
    assert len(problems) == 1, problems
    return problems[0]


# ---------------------------------------------------------------------------------------- reading rows


def test_every_key_of_a_route_is_read() -> None:
    s = load(
        settings(
            row(
                name="to-C",
                to_party_id_type=TYPE,
                cpa_id="cpa-demo-routed-a-c",
                service="urn:example:services:ordering",
                action="NewOrder",
                next_hop="https://127.0.0.1:8090/msh",
                next_hop_party_id=INTERMEDIARY,
                next_hop_party_id_type=TYPE,
                hop_ack=False,
                retries=0,
                retry_interval="PT2S",
                persist_duration="PT1H",
                trusted=["keys/intermediary.cert.pem", "keys/party-c.cert.pem"],
            )
        )
    )
    assert s.routing.routes == (
        Route(
            name="to-C",
            to_party_id=C,
            next_hop="https://127.0.0.1:8090/msh",
            to_party_id_type=TYPE,
            cpa_id="cpa-demo-routed-a-c",
            service="urn:example:services:ordering",
            action="NewOrder",
            next_hop_party=(INTERMEDIARY, TYPE),
            hop_ack=False,
            retries=0,
            retry_interval=XsDuration.from_timedelta(timedelta(seconds=2)),
            persist_duration=XsDuration.from_timedelta(timedelta(hours=1)),
            trusted=(str(KEYS / "intermediary.cert.pem"), str(KEYS / "party-c.cert.pem")),
        ),
    )
    assert s.agreements.paths == ()


def test_a_route_with_only_its_required_keys_takes_the_defaults() -> None:
    (route,) = load(settings(row())).routing.routes
    assert route == Route(name="route 1", to_party_id=C, next_hop="https://127.0.0.1:8092/msh")
    assert route.to_party_id_type is None and route.cpa_id is None and route.service is None and route.action is None
    assert route.next_hop_party is None
    assert route.hop_ack is True
    assert route.retries == DEFAULT_ROUTE_RETRIES
    assert route.retry_interval == DEFAULT_ROUTE_RETRY_INTERVAL
    assert route.persist_duration is None
    assert route.trusted == ()


def test_an_intermediary_without_a_type_is_untyped() -> None:
    (route,) = load(settings(row(next_hop_party_id="urn:duns:999999999"))).routing.routes
    assert route.next_hop_party == ("urn:duns:999999999", None)


def test_the_routes_keep_the_order_of_the_file_and_the_first_match_wins() -> None:
    s = load(
        settings(
            row(name="orders-to-C", action="NewOrder", next_hop="https://orders.example/msh"),
            row(name="rest-to-C"),
            row(name="to-A", to_party_id=A, next_hop="https://127.0.0.1:8081/msh"),
            row(name="never", next_hop="https://never.example/msh"),
        )
    )
    routes = s.routing.routes
    assert [r.name for r in routes] == ["orders-to-C", "rest-to-C", "to-A", "never"]
    to_c = [(C, TYPE)]
    assert find_route(routes, to_c, "cpa", "svc", "NewOrder") is routes[0]
    assert find_route(routes, to_c, "cpa", "svc", "OrderResponse") is routes[1]
    assert find_route(routes, [(A, TYPE)], "cpa", "svc", "NewOrder") is routes[2]
    # default names count every row, named or not
    unnamed = load(settings(row(name="first"), row(), row())).routing.routes
    assert [r.name for r in unnamed] == ["first", "route 2", "route 3"]


def test_routes_may_be_an_array_of_inline_tables() -> None:
    data = tomllib.loads(
        f'[routing]\nroutes = [{{ to_party_id = "{C}", next_hop = "http://c.example/msh" }}, '
        f'{{ to_party_id = "{A}", next_hop = "http://a.example/msh" }}]\n'
    )
    s = load({**settings(), **data})
    assert [(r.to_party_id, r.next_hop) for r in s.routing.routes] == [
        (C, "http://c.example/msh"),
        (A, "http://a.example/msh"),
    ]


def test_an_empty_routing_section_is_no_route() -> None:
    s = load({**settings(agreements=True), "routing": {}})
    assert s.routing.routes == ()
    s = load({**settings(agreements=True), "routing": {"routes": []}})
    assert s.routing.routes == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PT30S", XsDuration(0, 30_000_000)),
        ("P1M", XsDuration(months=1)),  # an agreement's RetryInterval may count months: so may a route's
        ("P1Y2M3DT4H", XsDuration(14, (3 * 86_400 + 4 * 3600) * 1_000_000)),
        ("PT0S", XsDuration()),
        (90, XsDuration(0, 90_000_000)),
        (0.5, XsDuration(0, 500_000)),
    ],
)
def test_route_durations_are_xs_durations_with_months_or_seconds(value: object, expected: XsDuration) -> None:
    (route,) = load(settings(row(retry_interval=value, persist_duration=value))).routing.routes
    assert route.retry_interval == expected
    assert route.persist_duration == expected


# ---------------------------------------------------------------------------------------------- refusals

_URL_HINT = 'write the next hop\'s endpoint URL, e.g. "https://127.0.0.1:8092/msh" or "mailto:msh@partner.example"'
_NOT_URL = "is not an http(s)://, mailto: or amqp(s):// URL"
_URL_EXAMPLES = (
    'write the next hop\'s endpoint, e.g. "https://127.0.0.1:8092/msh", "mailto:msh@partner.example" or '
    '"amqp://broker.example:5672/queue/partner"'
)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"next_hop": "ftp://x"},
            f"routing.routes[1].next_hop (in t.toml): 'ftp://x' {_NOT_URL}; {_URL_EXAMPLES}",
        ),
        (
            {"next_hop": "127.0.0.1:8092/msh"},
            f"routing.routes[1].next_hop (in t.toml): '127.0.0.1:8092/msh' {_NOT_URL}; {_URL_EXAMPLES}",
        ),
        ({"next_hop": "https:///msh"}, "routing.routes[1].next_hop (in t.toml): 'https:///msh' names no host"),
        (
            {"next_hop": 8092},
            f"routing.routes[1].next_hop (in t.toml): 8092 is an integer, not a string; {_URL_HINT}",
        ),
        (
            {"next_hop": None},
            f"routing.routes[1].next_hop (in t.toml) is required; {_URL_HINT}",
        ),
        (
            {"to_party_id": None},
            "routing.routes[1].to_party_id (in t.toml) is required; write the PartyId of the party the route leads "
            'to, e.g. to_party_id = "555555555"',
        ),
        (
            {"to_party_id": " "},
            "routing.routes[1].to_party_id (in t.toml): ' ' is empty; give the PartyId of the party the route leads "
            'to, e.g. "555555555"',
        ),
        (
            {"nexthop": "https://x/msh"},
            "routing.routes[1].nexthop (in t.toml) is not a route key (did you mean 'next_hop'?); the keys of a route "
            "are to_party_id, to_party_id_type, cpa_id, service, action, next_hop, next_hop_party_id, "
            "next_hop_party_id_type, hop_ack, retries, retry_interval, persist_duration, trusted, name",
        ),
        (
            {"next_hop_party_id_type": TYPE},
            "routing.routes[1].next_hop_party_id_type (in t.toml) is set but next_hop_party_id is not; a type "
            "qualifies a PartyId: name the intermediary's PartyId in next_hop_party_id, or leave "
            "next_hop_party_id_type out",
        ),
        (
            {"cpa_id": ""},
            "routing.routes[1].cpa_id (in t.toml): '' is empty; leave the key out to leave the setting unset",
        ),
        ({"action": "  "}, "routing.routes[1].action (in t.toml): '  ' is blank; write a value or leave the key out"),
        ({"name": " "}, "routing.routes[1].name (in t.toml): ' ' is blank; write a value or leave the key out"),
        (
            {"hop_ack": "yes"},
            "routing.routes[1].hop_ack (in t.toml): 'yes' is a string, not a boolean; write true (ask the next hop "
            "for hop acknowledgments) or false",
        ),
        ({"retries": -1}, "routing.routes[1].retries (in t.toml): -1 is negative; give a whole number of 0 or more"),
        (
            {"retries": "5"},
            "routing.routes[1].retries (in t.toml): '5' is a string, not an integer; write a whole number of 0 or "
            "more, e.g. 5",
        ),
        (
            {"retry_interval": "-PT1S"},
            "routing.routes[1].retry_interval (in t.toml): -PT1S is negative; give zero or a positive duration, "
            'e.g. "PT30S"',
        ),
        (
            {"retry_interval": -2},
            "routing.routes[1].retry_interval (in t.toml): -2 is negative; give a positive duration",
        ),
        (
            {"retry_interval": "soon"},
            "routing.routes[1].retry_interval (in t.toml): 'soon' is not an xs:duration; write it like PT30S, P1D or "
            "P1M, or give a number of seconds",
        ),
        (
            {"persist_duration": True},
            'routing.routes[1].persist_duration (in t.toml): true is a boolean, not a duration ("PT30S") or a number '
            'of seconds; write an xs:duration, e.g. "PT1H" or "P1D", or a number of seconds',
        ),
        (
            {"trusted": "keys/party-c.cert.pem"},
            "routing.routes[1].trusted (in t.toml): 'keys/party-c.cert.pem' is a string, not a list of paths; write "
            'a list of PEM certificate files, e.g. ["keys/party-c.cert.pem"]',
        ),
    ],
)
def test_a_bad_route_key_is_one_line_naming_the_route_the_key_and_the_file(keys: dict[str, Any], expected: str) -> None:
    assert one_problem(settings(row(**keys))).startswith(expected)


def test_trusted_files_must_exist_and_hold_certificates() -> None:
    problem = one_problem(settings(row(trusted=["keys/party-c.key.pem", "keys/nope.pem", "keys/party-c.cert.pem"])))
    assert problem == (
        f"routing.routes[1].trusted (in t.toml): {str(KEYS / 'party-c.key.pem')!r} holds no PEM certificate "
        "(-----BEGIN CERTIFICATE-----); give the next hop's certificate in PEM form; "
        f"{str(KEYS / 'nope.pem')!r} does not exist; give the path of a PEM file (a relative path is read from "
        f"{str(SAMPLES)!r})"
    )
    assert "MII" not in problem  # never the file's contents


def test_two_routes_cannot_share_a_name() -> None:
    # a default name ("route N") counts too
    assert problems_of(settings(row(name="to-C"), row(), row(name="to-C"), row(name="route 2"))) == [
        "routing.routes[3].name (in t.toml): 'to-C' is already the name of routing.routes[1]; give each route its "
        "own name",
        "routing.routes[4].name (in t.toml): 'route 2' is already the name of routing.routes[2]; give each route "
        "its own name",
    ]


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        (5, "routing (in t.toml) is an integer, not a section; write each route as a [[routing.routes]] table"),
        (
            [{"routes": []}],
            "routing (in t.toml) is a list, not a section; write each route as a [[routing.routes]] table",
        ),
        (
            {"routes": {"to_party_id": C, "next_hop": "https://x/msh"}},
            "routing.routes (in t.toml) is a table, not an array of tables; write each route as its own "
            "[[routing.routes]] table (double brackets)",
        ),
        (
            {"routes": "to-C"},
            "routing.routes (in t.toml) is a string, not an array of tables; write each route as its own "
            "[[routing.routes]] table (double brackets)",
        ),
        (
            {"routes": [1]},
            "routing.routes[1] (in t.toml) is an integer, not a table; write each route as a [[routing.routes]] "
            "table with its keys (to_party_id, to_party_id_type, cpa_id, service, action, next_hop, "
            "next_hop_party_id, next_hop_party_id_type, hop_ack, retries, retry_interval, persist_duration, "
            "trusted, name)",
        ),
        (
            {"route": []},
            "routing.route (in t.toml) is not a setting (did you mean 'routes'?); the only key of [routing] is "
            "routes, written as [[routing.routes]] tables",
        ),
    ],
)
def test_a_routing_section_of_the_wrong_shape_is_refused(routing: object, expected: str) -> None:
    data = settings(agreements=True)
    data["routing"] = routing
    assert one_problem(data) == expected


def test_the_routing_section_is_listed_with_the_others() -> None:
    problem = one_problem({**settings(row()), "routes": []})
    assert problem.startswith("[routes] (in t.toml) is not a settings section (did you mean 'routing'?)")
    assert problem.endswith(
        "[sending], [receiving], [timers], [api], [admin], [retention], [smtp], [smtpd], [mailbox], [amqp], [routing]"
    )


@pytest.mark.parametrize("variable", ["MSH_ROUTING_ROUTES", "MSH_ROUTING_NEXT_HOP", "MSH_ROUTING"])
def test_routes_cannot_come_from_the_environment(variable: str) -> None:
    assert one_problem(settings(row()), env={variable: "https://x/msh"}) == (
        f"{variable} (environment): routes cannot come from the environment; they are configured in the "
        f"configuration file, one [[routing.routes]] table per route; unset {variable}"
    )


def test_every_problem_of_every_route_is_reported_at_once() -> None:
    data = settings(
        row(name="ok"),
        row(next_hop="ftp://x", retries=-1, colour="blue"),
        "not a table",
        row(to_party_id=None, next_hop=None, next_hop_party_id_type=TYPE),
        server={"tls": False, "port": 70000},
    )
    with pytest.raises(SettingsError) as caught:
        load(data, env={"MSH_ROUTING_ROUTES": "x"})
    lines = str(caught.value).splitlines()
    assert lines[0] == "the MSH settings from t.toml have 9 problems:"
    assert [line.split()[1] for line in lines[1:]] == [
        "MSH_ROUTING_ROUTES",
        "server.port",
        "routing.routes[2].colour",
        "routing.routes[2].next_hop",
        "routing.routes[2].retries",
        "routing.routes[3]",
        "routing.routes[4].to_party_id",
        "routing.routes[4].next_hop",
        "routing.routes[4].next_hop_party_id_type",
    ]


def test_every_problem_of_a_row_is_named_and_the_row_is_left_out() -> None:
    problems = problems_of(settings(row(to_party_id=None, next_hop_party_id_type=TYPE, retries=-1)))
    assert [p.split()[0] for p in problems] == [
        "routing.routes[1].to_party_id",
        "routing.routes[1].retries",
        "routing.routes[1].next_hop_party_id_type",
    ]


# -------------------------------------------------------------------------------- agreements or routes


def test_a_pure_intermediary_needs_no_agreement() -> None:
    s = load(settings(row()))
    assert s.agreements.paths == () and s.agreements.files() == ()
    assert len(s.routing.routes) == 1


def test_an_msh_with_neither_agreements_nor_routes_is_refused() -> None:
    expected = (
        "is empty and no routing.routes are configured: this MSH would have nothing to do; name the CPA files it "
        "works under in agreements.paths (or MSH_AGREEMENTS_PATHS), or, for an intermediary, configure its routes "
        "as [[routing.routes]] tables in the configuration file"
    )
    assert one_problem(settings()) == f"agreements.paths (default) {expected}"
    assert one_problem({**settings(), "agreements": {"paths": []}}) == f"agreements.paths (from t.toml) {expected}"
    data = settings()
    del data["routing"]
    assert one_problem(data, env={"MSH_AGREEMENTS_PATHS": ""}) == (
        f"agreements.paths (from MSH_AGREEMENTS_PATHS) {expected}"
    )
    # agreements alone, routes alone, or both: fine
    assert load(settings(agreements=True)).routing.routes == ()
    assert load(settings(row(), agreements=True)).agreements.paths == (ROUTED_CPA,)


def test_a_bad_route_is_not_also_reported_as_no_route() -> None:
    assert one_problem(settings(row(next_hop="ftp://x"))).startswith("routing.routes[1].next_hop")
    assert one_problem(settings(row(), agreements=False, routing={"routes": 1})).startswith("routing.routes (in")


def test_settings_built_in_code_need_agreements_or_routes() -> None:
    identity, store, plain = IdentitySettings("urn:x:1"), StoreSettings("memory:"), ServerSettings(tls=False)
    with pytest.raises(ConfigurationError, match=r"agreements\.paths is empty and no routing\.routes are configured"):
        Settings(identity, AgreementSettings(), store, plain)
    route = Route(name="to-C", to_party_id=C, next_hop="https://127.0.0.1:8092/msh")
    s = Settings(identity, AgreementSettings(), store, plain, routing=RoutingSettings((route,)))
    assert s.routing.routes == (route,)
    assert Settings(identity, AgreementSettings((ROUTED_CPA,)), store, plain).routing == RoutingSettings()


def test_the_routing_dataclasses_check_themselves_when_built_directly() -> None:
    route = Route(name="x", to_party_id=C, next_hop="https://127.0.0.1:8092/msh")
    with pytest.raises(
        SettingsError, match=r"routing\.routes\[2\]\.name: 'x' is already the name of routing\.routes\[1\]"
    ):
        RoutingSettings((route, route))
    with pytest.raises(
        SettingsError, match=r"routing\.routes\.next_hop: 'ftp://x' is not an http\(s\)://, mailto: or amqp\(s\):// URL"
    ):
        RouteKeys(to_party_id=C, next_hop="ftp://x")
    with pytest.raises(SettingsError, match=r"routing\.routes\.next_hop_party_id_type is set but next_hop_party_id"):
        RouteKeys(to_party_id=C, next_hop="https://x/msh", next_hop_party_id_type=TYPE)
    keys = RouteKeys(to_party_id=C, next_hop="https://x/msh", trusted=(KEYS / "party-c.cert.pem",))
    assert keys.route(7) == Route(
        name="route 7", to_party_id=C, next_hop="https://x/msh", trusted=(str(KEYS / "party-c.cert.pem"),)
    )


# ------------------------------------------------------------------------------------------ describe


def test_describe_prints_each_route_after_the_settings_paths_only() -> None:
    s = load(
        settings(
            row(
                name="to-C",
                to_party_id_type=TYPE,
                next_hop="https://127.0.0.1:8090/msh",
                next_hop_party_id=INTERMEDIARY,
                next_hop_party_id_type=TYPE,
                retry_interval="P1M",
                trusted=["keys/intermediary.cert.pem"],
            ),
            row(to_party_id=A, cpa_id="cpa-1", action="Ping", hop_ack=False, retries=2, persist_duration=3600),
        )
    )
    lines = describe(s).splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        *(d.name for d in config.SETTINGS),
        "routing.routes[1]",
        "routing.routes[2]",
    ]
    assert lines[-2:] == [
        f"routing.routes[1] = route to-C: To {C} (type {TYPE}) -> https://127.0.0.1:8090/msh (intermediary "
        f"{INTERMEDIARY}), hop_ack true, retries 5, retry_interval P1M, persist_duration (not set), trusted "
        f'["{KEYS / "intermediary.cert.pem"}"]',
        f"routing.routes[2] = route 2: To {A} with CPA cpa-1, action Ping -> https://127.0.0.1:8092/msh, "
        "hop_ack false, retries 2, retry_interval PT30S, persist_duration PT1H, trusted []",
    ]
    certificate_body = (KEYS / "intermediary.cert.pem").read_text().splitlines()[1]
    assert certificate_body not in describe(s)


def test_describe_says_when_there_are_no_routes() -> None:
    lines = describe(load(settings(agreements=True))).splitlines()
    assert lines[-1] == "routing.routes = (none)"


# ------------------------------------------------------------------------------------------- samples


def test_the_multihop_samples_load_with_their_routes() -> None:
    a = load_settings(MULTIHOP / "party-a.toml", env={})
    assert (a.identity.party_id, a.identity.party_id_type, a.server.port) == (A, TYPE, 8081)
    assert a.agreements.paths == (ROUTED_CPA,)
    assert a.store.url == str(MULTIHOP / "party-a.sqlite")
    assert (a.tls.certificate, a.tls.private_key) == (KEYS / "party-a.cert.pem", KEYS / "party-a.key.pem")
    assert a.tls.trusted == (KEYS / "intermediary.cert.pem",)
    assert a.tls.require_client_certificate is True
    assert a.routing.routes == (
        Route(
            name="to-C",
            to_party_id=C,
            to_party_id_type=TYPE,
            next_hop="https://127.0.0.1:8090/msh",
            next_hop_party=(INTERMEDIARY, TYPE),
            retries=5,
            retry_interval=XsDuration.parse("PT5S"),
            trusted=(str(KEYS / "intermediary.cert.pem"),),
        ),
    )

    i = load_settings(MULTIHOP / "intermediary.toml", env={})
    assert (i.identity.party_id, i.identity.party_id_type, i.server.port) == (INTERMEDIARY, TYPE, 8090)
    assert i.agreements.paths == ()
    assert i.store.url == str(MULTIHOP / "intermediary.sqlite")
    assert (i.tls.certificate, i.tls.private_key) == (KEYS / "intermediary.cert.pem", KEYS / "intermediary.key.pem")
    assert i.tls.trusted == (KEYS / "party-a.cert.pem", KEYS / "party-c.cert.pem")
    assert i.routing.routes == (
        Route(
            name="to-C",
            to_party_id=C,
            to_party_id_type=TYPE,
            next_hop="https://127.0.0.1:8092/msh",
            retries=5,
            retry_interval=XsDuration.parse("PT5S"),
            persist_duration=XsDuration.parse("P1D"),
            trusted=(str(KEYS / "party-c.cert.pem"),),
        ),
        Route(
            name="to-A",
            to_party_id=A,
            to_party_id_type=TYPE,
            next_hop="https://127.0.0.1:8081/msh",
            retries=5,
            retry_interval=XsDuration.parse("PT5S"),
            persist_duration=XsDuration.parse("P1D"),
            trusted=(str(KEYS / "party-a.cert.pem"),),
        ),
    )

    c = load_settings(MULTIHOP / "party-c.toml", env={})
    assert (c.identity.party_id, c.identity.party_id_type, c.server.port) == (C, TYPE, 8092)
    assert c.agreements.paths == (ROUTED_CPA,)
    assert c.store.url == str(MULTIHOP / "party-c.sqlite")
    assert (c.tls.certificate, c.tls.private_key) == (KEYS / "party-c.cert.pem", KEYS / "party-c.key.pem")
    assert c.tls.trusted == (KEYS / "intermediary.cert.pem",)
    assert c.routing.routes == (
        Route(
            name="to-A",
            to_party_id=A,
            to_party_id_type=TYPE,
            next_hop="https://127.0.0.1:8090/msh",
            next_hop_party=(INTERMEDIARY, TYPE),
            retries=5,
            retry_interval=XsDuration.parse("PT5S"),
            trusted=(str(KEYS / "intermediary.cert.pem"),),
        ),
    )


def test_the_multihop_samples_fit_together() -> None:
    """Each route's next hop is the endpoint of the MSH it names, and that MSH presents the route's certificate."""
    names = ("party-a", "intermediary", "party-c")
    by_port = {s.server.port: s for s in (load_settings(MULTIHOP / f"{n}.toml", env={}) for n in names)}
    for s in by_port.values():
        assert s.server.tls and s.tls.require_client_certificate
        for route in s.routing.routes:
            endpoint = re.fullmatch(r"https://127\.0\.0\.1:(\d+)/msh", route.next_hop)
            assert endpoint is not None, route
            target = by_port[int(endpoint.group(1))]
            assert route.trusted == (str(target.tls.certificate),)
            assert s.tls.certificate in target.tls.trusted  # the next hop trusts our client certificate
            if route.next_hop_party is not None:
                assert route.next_hop_party == (target.identity.party_id, target.identity.party_id_type)
            else:
                assert route.to_party_id == target.identity.party_id


def test_the_multihop_samples_set_every_setting() -> None:
    for name in ("party-a.toml", "intermediary.toml", "party-c.toml"):
        data = shown_settings(MULTIHOP / name)  # one left off on purpose is shown commented out
        written = [f"{section}.{key}" for section, table in data.items() if section != "routing" for key in table]
        assert written == [d.name for d in config.SETTINGS], name
        for route in data["routing"]["routes"]:
            assert {"name", "to_party_id", "to_party_id_type", "next_hop", "trusted"} <= set(route), name


# ------------------------------------------------------------------------- docs/configuration.md


def test_the_docs_table_of_route_keys_is_drawn_from_the_declaration() -> None:
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "\n\n" + route_keys_table() + "\n" in readme
    assert [line.split("`")[1] for line in route_keys_table().splitlines()[2:]] == [d.key for d in config.ROUTE_KEYS]


def _readme_toml_snippets() -> list[str]:
    """The TOML snippets of the README and of every page of the documentation site."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    return re.findall(r"^```toml\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_the_readme_routing_examples_load() -> None:
    """Each TOML snippet of the docs is valid TOML; those with routes load as settings (a snippet without an
    [identity] is a fragment: it is loaded into party A's settings), paths read from samples/."""
    routed = 0
    for snippet in _readme_toml_snippets():
        data = tomllib.loads(snippet)
        if "routing" not in data:
            continue
        routed += 1
        if "identity" not in data:
            data = {**settings(agreements=True), "identity": {"party_id": A, "party_id_type": TYPE}, **data}
        s = settings_from_mapping(data, base_dir=SAMPLES, source="README.md", env={})
        assert s.routing.routes
        for route in s.routing.routes:
            assert all(Path(path).is_file() for path in route.trusted)
    assert routed >= 2
