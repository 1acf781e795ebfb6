"""The routing table in the settings file: ``[[routing.routes]]`` tables, each read into a
:class:`~msh.engine.routing.Route` (ebMS2 §10: where a message goes next is the intermediary's own
configuration).

The keys of a route are declared once, like the settings (:class:`RouteKeys`, see :mod:`.declaration`):
its fields give each key's type, default and check, and the README's table of route keys
(:func:`route_keys_table`). :func:`read_routes` reads the ``routing`` section of the file: every problem
of every row is reported, each naming ``routing.routes[N].key`` (N counted from 1, in file order) and the
file. Routes come only from the file: an array of tables has no ``MSH_<SECTION>_<KEY>`` spelling.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from cpa.duration import XsDuration
from msh.engine.routing import DEFAULT_ROUTE_RETRIES, DEFAULT_ROUTE_RETRY_INTERVAL, Route
from msh.runtime.config import rules
from msh.runtime.config.declaration import Declared, Section, SettingsError, declared, setting
from msh.runtime.config.values import PEM_FILE, PEM_FILES, XS_DURATION, Invalid, did_you_mean, show, type_name

__all__ = ["ROUTES", "ROUTE_KEYS", "ROUTING", "RouteKeys", "describe_routes", "read_routes", "route_keys_table"]

ROUTING: Final = "routing"
"""The section of the routing table."""

ROUTES: Final = "routes"
"""Its one key: the array of ``[[routing.routes]]`` tables."""

_PARTY_ID_TYPE_EXAMPLE: Final = '"urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"'


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteKeys(Section):
    """The keys of one ``[[routing.routes]]`` table, as read from the file (paths made absolute).

    :meth:`route` gives the :class:`~msh.engine.routing.Route` the row stands for. The fields are in the
    order the README and the messages list them.
    """

    section: ClassVar[str] = "routing.routes"

    to_party_id: str = field(
        metadata=setting(
            'write the PartyId of the party the route leads to, e.g. to_party_id = "555555555"',
            check=rules.route_party_id,
            meaning="the To PartyId of the messages the route takes",
        )
    )
    to_party_id_type: str | None = field(
        default=None,
        metadata=setting(
            f"write the type of that PartyId, e.g. {_PARTY_ID_TYPE_EXAMPLE}",
            check=rules.not_blank,
            meaning="the type of that PartyId",
            unset="any type (the untyped PartyId included)",
        ),
    )
    cpa_id: str | None = field(
        default=None,
        metadata=setting(
            'write a CPAId, e.g. "cpa-demo-routed-a-c"',
            check=rules.not_blank,
            meaning="only messages under this agreement (CPAId)",
            unset="any",
        ),
    )
    service: str | None = field(
        default=None,
        metadata=setting(
            'write a Service, e.g. "urn:example:services:ordering"',
            check=rules.not_blank,
            meaning="only messages of this Service",
            unset="any",
        ),
    )
    action: str | None = field(
        default=None,
        metadata=setting(
            'write an Action, e.g. "NewOrder"',
            check=rules.not_blank,
            meaning="only messages of this Action",
            unset="any",
        ),
    )
    next_hop: str = field(
        metadata=setting(
            'write the next hop\'s endpoint URL, e.g. "https://127.0.0.1:8092/msh" or "mailto:msh@partner.example"',
            check=rules.endpoint_url,
            meaning="the endpoint the messages are sent to: an http(s):// URL, a mailto: address (SMTP) or an "
            "amqp(s):// address on a broker (docs/transports)",
        )
    )
    next_hop_party_id: str | None = field(
        default=None,
        metadata=setting(
            'write the PartyId of the intermediary at next_hop, e.g. "999999999"',
            check=rules.not_blank,
            meaning="the PartyId of the next hop when it is an intermediary: its hop acknowledgments and error "
            "messages about our messages count",
            unset="the next hop is the To party",
        ),
    )
    next_hop_party_id_type: str | None = field(
        default=None,
        metadata=setting(
            f"write the type of the intermediary's PartyId, e.g. {_PARTY_ID_TYPE_EXAMPLE}",
            check=rules.not_blank,
            meaning="the type of that PartyId (only with `next_hop_party_id`)",
        ),
    )
    hop_ack: bool = field(
        default=True,
        metadata=setting(
            "write true (ask the next hop for hop acknowledgments) or false",
            meaning="when forwarding a message that asks for a hop acknowledgment, ask the next hop for one "
            "(AckRequested aimed at nextMSH, ebMS2 §10.1.1)",
        ),
    )
    retries: int = field(
        default=DEFAULT_ROUTE_RETRIES,
        metadata=setting(
            f"write a whole number of 0 or more, e.g. {DEFAULT_ROUTE_RETRIES}",
            check=rules.not_negative_count,
            meaning="resends on this hop",
        ),
    )
    retry_interval: XsDuration = field(
        default=DEFAULT_ROUTE_RETRY_INTERVAL,
        metadata=setting(
            'write an xs:duration, e.g. "PT30S" or "P1D", or a number of seconds',
            check=rules.not_negative_xs_duration,
            kind=XS_DURATION,
            meaning="the wait between transmissions on this hop (an xs:duration, which may count months, or seconds)",
        ),
    )
    persist_duration: XsDuration | None = field(
        default=None,
        metadata=setting(
            'write an xs:duration, e.g. "PT1H" or "P1D", or a number of seconds',
            check=rules.not_negative_xs_duration,
            kind=XS_DURATION,
            meaning="how long a message forwarded on this hop is kept",
        ),
    )
    trusted: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of PEM certificate files, e.g. ["keys/party-c.cert.pem"]',
            kind=PEM_FILES,
            meaning="the certificates (PEM files) that authenticate the next hop's TLS server (empty: `tls.trusted`)",
        ),
    )
    name: str | None = field(
        default=None,
        metadata=setting(
            'write a name for the route, e.g. "to-C"',
            check=rules.not_blank,
            meaning="the route's name in logs and messages",
            unset="`route N`, N its position (from 1)",
        ),
    )

    def __post_init__(self) -> None:
        Section.__post_init__(self)  # the checks of each key (slots: no zero-argument super())
        problem = _party_type_without_party(self.next_hop_party_id, self.next_hop_party_id_type)
        if problem:
            raise SettingsError(type(self).__name__, [f"{self.section}.next_hop_party_id_type {problem}"])

    def route(self, position: int) -> Route:
        """The :class:`~msh.engine.routing.Route` of this row, the ``position``-th of the table (from 1)."""
        party = None if self.next_hop_party_id is None else (self.next_hop_party_id, self.next_hop_party_id_type)
        return Route(
            name=self.name if self.name is not None else f"route {position}",
            to_party_id=self.to_party_id,
            next_hop=self.next_hop,
            to_party_id_type=self.to_party_id_type,
            cpa_id=self.cpa_id,
            service=self.service,
            action=self.action,
            next_hop_party=party,
            hop_ack=self.hop_ack,
            retries=self.retries,
            retry_interval=self.retry_interval,
            persist_duration=self.persist_duration,
            trusted=tuple(str(path) for path in self.trusted),
        )


def _party_type_without_party(party_id: str | None, party_id_type: str | None) -> str | None:
    if party_id_type is not None and party_id is None:
        return (
            "is set but next_hop_party_id is not; a type qualifies a PartyId: name the intermediary's PartyId in "
            "next_hop_party_id, or leave next_hop_party_id_type out"
        )
    return None


ROUTE_KEYS: Final[tuple[Declared, ...]] = declared(RouteKeys)
"""The keys of a route, in declaration order (the order of the README's table and of the messages)."""

_BY_KEY: Final = {d.key: d for d in ROUTE_KEYS}


def read_routes(section: object, source: str, base_dir: Path) -> tuple[tuple[Route, ...], list[str]]:
    """The routes of the file's ``routing`` section (``section``, as TOML gives it) and the problems found.

    ``source`` names the file in the messages, ``base_dir`` is the folder relative paths are read from.
    The routes are in file order (the first matching route wins); when there are problems, they are the
    rows that had none.
    """
    problems: list[str] = []
    if not isinstance(section, Mapping):
        problems.append(
            f"{ROUTING} (in {source}) is {type_name(section)}, not a section; write each route as a "
            f"[[{ROUTING}.{ROUTES}]] table"
        )
        return (), problems
    for key in section:
        if key != ROUTES:
            problems.append(
                f"{ROUTING}.{key} (in {source}) is not a setting{did_you_mean(key, [ROUTES])}; the only key of "
                f"[{ROUTING}] is {ROUTES}, written as [[{ROUTING}.{ROUTES}]] tables"
            )
    rows = section.get(ROUTES, [])
    if not isinstance(rows, list):
        problems.append(
            f"{ROUTING}.{ROUTES} (in {source}) is {type_name(rows)}, not an array of tables; write each route as "
            f"its own [[{ROUTING}.{ROUTES}]] table (double brackets)"
        )
        return (), problems
    routes: list[Route] = []
    names: dict[str, int] = {}
    for position, row in enumerate(rows, start=1):
        where = f"{ROUTING}.{ROUTES}[{position}]"
        if not isinstance(row, Mapping):
            problems.append(
                f"{where} (in {source}) is {type_name(row)}, not a table; write each route as a "
                f"[[{ROUTING}.{ROUTES}]] table with its keys ({', '.join(d.key for d in ROUTE_KEYS)})"
            )
            continue
        route, row_problems = _read_row(row, where, position, source, base_dir)
        problems.extend(row_problems)
        if route is None:
            continue
        if route.name in names:
            problems.append(
                f"{where}.name (in {source}): {show(route.name)} is already the name of "
                f"{ROUTING}.{ROUTES}[{names[route.name]}]; give each route its own name"
            )
            continue
        names[route.name] = position
        routes.append(route)
    return tuple(routes), problems


def _read_row(
    row: Mapping[str, Any], where: str, position: int, source: str, base_dir: Path
) -> tuple[Route | None, list[str]]:
    """One row: its :class:`Route` (None when it has a problem) and its problems."""
    problems: list[str] = []
    for key in row:
        if key not in _BY_KEY:
            problems.append(
                f"{where}.{key} (in {source}) is not a route key{did_you_mean(key, list(_BY_KEY))}; the keys of "
                f"a route are {', '.join(_BY_KEY)}"
            )
    values: dict[str, Any] = {}
    for d in ROUTE_KEYS:
        label = f"{where}.{d.key} (in {source})"
        if d.key not in row:
            if d.required:
                problems.append(f"{label} is required; {d.hint}")
            continue
        try:
            value = d.read(row[d.key], from_env=False)
        except Invalid as exc:
            problems.append(f"{label}: {exc}")
            continue
        value = d.kind.resolve(value, base_dir)
        if d.key == "trusted":  # each file exists and holds certificates, as tls.trusted's must
            found = (_certificate_problem(path, base_dir) for path in value)
            problem = "; ".join(p for p in found if p) or None
        else:
            problem = d.problem(value) or d.kind.verify(value, base_dir)
        if problem:
            problems.append(f"{label}: {problem}")
            continue
        values[d.key] = value
    if "next_hop_party_id_type" in values and "next_hop_party_id" not in row:
        problem = _party_type_without_party(None, values["next_hop_party_id_type"])
        problems.append(f"{where}.next_hop_party_id_type (in {source}) {problem}")
    if problems:
        return None, problems
    try:
        return RouteKeys(**values).route(position), []
    except (SettingsError, ValueError) as exc:  # the checks above already hold; kept for a readable report
        return None, [f"{where} (in {source}): {exc}"]


def _certificate_problem(path: Path, base_dir: Path) -> str | None:
    return PEM_FILE.verify(path, base_dir) or rules.certificate_file_problem(path, "the next hop's certificate")


def describe_routes(routes: Sequence[Route]) -> list[str]:
    """The routing table as ``msh serve --print-settings`` prints it: one line per route (certificate files
    by path only), or ``routing.routes = (none)``."""
    if not routes:
        return [f"{ROUTING}.{ROUTES} = (none)"]
    lines = []
    for position, route in enumerate(routes, start=1):
        persist = "(not set)" if route.persist_duration is None else str(route.persist_duration)
        trusted = "[" + ", ".join(json.dumps(path) for path in route.trusted) + "]"
        lines.append(
            f"{ROUTING}.{ROUTES}[{position}] = {route.describe()}, hop_ack {'true' if route.hop_ack else 'false'}, "
            f"retries {route.retries}, retry_interval {route.retry_interval}, persist_duration {persist}, "
            f"trusted {trusted}"
        )
    return lines


def route_keys_table() -> str:
    """The README's table of the keys of a route (Markdown): each key, its default and its meaning."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for d in ROUTE_KEYS:
        lines.append(f"| `{d.key}` | {d.table_default} | {d.meaning} |")
    return "\n".join(lines) + "\n"
