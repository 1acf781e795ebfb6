"""The rules that tie settings together (:data:`CROSS_RULES`): each a small named check saying what it
protects, checked only when all the settings it reads are usable, reported in the table's order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from msh.runtime.config.rules import URI, Label
from msh.runtime.config.values import format_duration, show

__all__ = ["CROSS_RULES", "CrossRule", "Given", "cross_problems"]


@dataclass(frozen=True, slots=True)
class Given:
    """The effective settings as a cross-setting rule sees them: each value, its label, whether it is usable."""

    values: Mapping[str, Any]
    """``section.key`` -> the effective value (``routing.routes`` too)."""
    label: Label
    bad: Collection[str]
    """The settings that already have a problem of their own."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def usable(self, *keys: str) -> bool:
        """True when each of ``keys`` has a value and no problem of its own."""
        return all(k in self.values and k not in self.bad for k in keys)


@dataclass(frozen=True, slots=True)
class CrossRule:
    """One rule that ties settings together: it is checked only when all its ``keys`` are usable."""

    keys: tuple[str, ...]
    check: Callable[[Given], str | None]
    """None, or what is wrong, naming the settings (with :attr:`Given.label`) and what to write instead."""
    protects: str
    """What goes wrong without the rule."""


def _one_half(given: Given, first: str, second: str, needs: str) -> str | None:
    """Of two settings that go together, one is set and the other is not."""
    if (given[first] is None) == (given[second] is None):
        return None
    set_, unset = (first, second) if given[first] is not None else (second, first)
    return f"{given.label(set_)} is set but {unset} is not; {needs}"


def _names_someone(section: str, who: str, example: str) -> Callable[[Given], str | None]:
    """The rule of ``[api]`` and ``[admin]``: enabled, they name someone who can authenticate (``who``)."""

    def check(given: Given) -> str | None:
        if not given[f"{section}.enabled"] or given[f"{section}.{who}"] or given[f"{section}.client_ca"]:
            return None
        label = given.label
        return (
            f"{label(section + '.enabled')} is true but {label(section + '.' + who)} names no {who[:-1]} (and "
            f"{label(section + '.client_ca')} is empty): add one, e.g. [{example}]"
        )

    return check


def _tls_has_a_key_pair(section: str) -> Callable[[Given], str | None]:
    """The rule of ``[api]`` and ``[admin]``: HTTPS (asked for, or implied by client certificates) has a key pair."""

    def check(given: Given) -> str | None:
        tls, ca = f"{section}.tls", f"{section}.client_ca"
        if not (given[tls] or given[ca]):
            return None
        if given["tls.certificate"] is not None and given["tls.private_key"] is not None and given[tls]:
            return None
        label = given.label
        return (
            f"{label(tls)} (or {label(ca)}) needs HTTPS: set {label(tls)} true, "
            f"{label('tls.certificate')} and {label('tls.private_key')}"
        )

    return check


def _admin_port_is_its_own(given: Given) -> str | None:
    if not given["admin.enabled"] or given["admin.port"] == 0:
        return None
    taken = [k for k in ("server.port", "api.port") if given[k] == given["admin.port"]]
    if taken == ["api.port"] and not given["api.enabled"]:
        return None
    if not taken:
        return None
    label = given.label
    return (
        f"{label('admin.port')} = {given['admin.port']} is also {label(taken[0])}: the admin port is separate from "
        "the ebMS endpoint and the application interfaces; choose another port (e.g. 8091)"
    )


def _stall_after_outlasts_polling(given: Given) -> str | None:
    stall, poll = given["admin.stall_after"], given["timers.poll_interval"]
    if stall > poll:
        return None
    label = given.label
    return (
        f"{label('admin.stall_after')} = {format_duration(stall)} is not greater than "
        f"{label('timers.poll_interval')} = {format_duration(poll)}: the timer loop waits that long between "
        "rounds, so it would be reported stalled while idle; make admin.stall_after longer"
    )


def _https_has_a_key_pair(given: Given) -> str | None:
    unset = [k for k in ("tls.certificate", "tls.private_key") if given[k] is None]
    if not given["server.tls"] or not unset:
        return None
    return (
        f"{given.label('server.tls')} is true (serve HTTPS) but {' and '.join(given.label(k) for k in unset)} "
        f"{'is' if len(unset) == 1 else 'are'} not set; give our certificate and private key (PEM files), "
        "or set server.tls = false to serve plain HTTP"
    )


def _tls_key_pair_is_whole(given: Given) -> str | None:
    if given.usable("server.tls") and given["server.tls"]:
        return None  # _https_has_a_key_pair names the missing half
    return _one_half(given, "tls.certificate", "tls.private_key", "a TLS client certificate needs both halves")


def _signing_key_pair_is_whole(given: Given) -> str | None:
    return _one_half(
        given, "security.signing_key", "security.signing_certificate", "signing needs the key and its certificate"
    )


def _first_resend_after_http_timeout(given: Given) -> str | None:
    first, http = given["sending.first_resend_timeout"], given["sending.http_timeout"]
    if first is None or first > http:
        return None
    label = given.label
    return (
        f"{label('sending.first_resend_timeout')} = {format_duration(first)} is not greater than "
        f"{label('sending.http_timeout')} = {format_duration(http)}: an HTTP exchange must end before the "
        "first resend is due, otherwise a slow answer counts as lost and the message is resent while still "
        "in flight; make sending.http_timeout shorter or sending.first_resend_timeout longer"
    )


def _renewal_within_the_lease(given: Given) -> str | None:
    lease, renew = given["timers.lease"], given["timers.renew_interval"]
    if renew < lease:
        return None
    label = given.label
    return (
        f"{label('timers.renew_interval')} = {format_duration(renew)} is not shorter than "
        f"{label('timers.lease')} = {format_duration(lease)}: a live process's claims would run out before it "
        "renews them and another process would take its timers over; make timers.renew_interval shorter "
        "(a third of the lease leaves room for two late renewals) or timers.lease longer"
    )


def _agreements_or_routes(given: Given) -> str | None:
    if given["agreements.paths"] or given["routing.routes"]:
        return None
    return (
        f"{given.label('agreements.paths')} is empty and no routing.routes are configured: this MSH would have "
        "nothing to do; name the CPA files it works under in agreements.paths (or MSH_AGREEMENTS_PATHS), or, "
        "for an intermediary, configure its routes as [[routing.routes]] tables in the configuration file"
    )


def _untyped_party_id_is_a_uri(given: Given) -> str | None:
    party_id = given["identity.party_id"]
    # ebMS2 §3.1.1.1: without a type attribute the PartyId MUST be a URI (else Inconsistent).
    if given["identity.party_id_type"] is not None or not party_id.strip() or URI.fullmatch(party_id):
        return None
    return (
        f"{given.label('identity.party_id')} = {show(party_id)} has no identity.party_id_type and is not a URI; "
        "ebMS2 §3.1.1.1 requires an untyped PartyId to be a URI (partners reject it as Inconsistent): set "
        'identity.party_id_type (e.g. "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088") or write the '
        'PartyId as a URI (e.g. "urn:duns:123456789")'
    )


def _mail_has_a_sender(given: Given) -> str | None:
    if not given["smtp.host"] or given["smtp.from_address"]:
        return None
    # ebMS2 B.3.2: the From header MUST contain the e-mail address of the sender's MSH.
    return (
        f"{given.label('smtp.host')} is set (send mail through {show(given['smtp.host'])}) but "
        f"{given.label('smtp.from_address')} is empty: every mail needs our MSH's e-mail address as its From and "
        'envelope sender (ebMS2 B.3.2); write it, e.g. from_address = "msh@example.com"'
    )


def _smtp_log_in_is_whole(given: Given) -> str | None:
    user, password = given["smtp.username"], given["smtp.password"]
    label = given.label
    if bool(user) != bool(password):
        set_, unset = ("smtp.username", "smtp.password") if user else ("smtp.password", "smtp.username")
        return f"{label(set_)} is set but {unset} is not; logging in to the relay (SMTP AUTH) needs both"
    if user and given["smtp.security"] == "none":
        return (
            f'{label("smtp.username")} is set with {label("smtp.security")} = "none": the password would cross '
            'the network in clear; set security = "starttls" (or "tls" for a relay on port 465)'
        )
    return None


def _amqp_receiving_has_a_queue(given: Given) -> str | None:
    if not given["amqp.enabled"] or given["amqp.url"]:
        return None
    return (
        f"{given.label('amqp.enabled')} is true but amqp.url is empty; write our broker and queue, e.g. "
        '"amqp://127.0.0.1:5672/queue/ebms-b", or set amqp.enabled to false'
    )


CROSS_RULES: Final[tuple[CrossRule, ...]] = (
    CrossRule(
        ("api.enabled", "api.applications", "api.client_ca"),
        _names_someone("api", "applications", '"billing=env:BILLING_TOKEN"'),
        "interfaces that no application can authenticate to",
    ),
    CrossRule(
        ("api.tls", "api.client_ca", "tls.certificate", "tls.private_key"),
        _tls_has_a_key_pair("api"),
        "client certificates asked for over plain HTTP, or HTTPS without a key pair",
    ),
    CrossRule(
        ("admin.enabled", "admin.operators", "admin.client_ca"),
        _names_someone("admin", "operators", '"ops=env:MSH_OPS_TOKEN"'),
        "an admin port that no operator can authenticate to",
    ),
    CrossRule(
        ("admin.tls", "admin.client_ca", "tls.certificate", "tls.private_key"),
        _tls_has_a_key_pair("admin"),
        "operators' client certificates asked for over plain HTTP, or HTTPS without a key pair",
    ),
    CrossRule(
        ("admin.enabled", "admin.port", "server.port", "api.enabled", "api.port"),
        _admin_port_is_its_own,
        "the admin port on the ebMS endpoint's or the application interfaces' port (the second one fails to start)",
    ),
    CrossRule(
        ("admin.stall_after", "timers.poll_interval"),
        _stall_after_outlasts_polling,
        "an idle timer loop reported as stalled",
    ),
    CrossRule(
        ("server.tls", "tls.certificate", "tls.private_key"),
        _https_has_a_key_pair,
        "an HTTPS endpoint without a certificate or key to serve",
    ),
    CrossRule(
        ("tls.certificate", "tls.private_key"),
        _tls_key_pair_is_whole,
        "a TLS client certificate presented without its key, or a key without its certificate",
    ),
    CrossRule(
        ("security.signing_key", "security.signing_certificate"),
        _signing_key_pair_is_whole,
        "a signing key without the certificate that goes with it, or a certificate without its key (ebMS2 §4.1)",
    ),
    CrossRule(
        ("sending.first_resend_timeout", "sending.http_timeout"),
        _first_resend_after_http_timeout,
        "a message resent while its first transmission is still in flight",
    ),
    CrossRule(
        ("timers.lease", "timers.renew_interval"),
        _renewal_within_the_lease,
        "the timers of a live process taken over by another one",
    ),
    CrossRule(
        ("agreements.paths", "routing.routes"),
        _agreements_or_routes,
        "an MSH that has nothing to do",
    ),
    CrossRule(
        ("identity.party_id", "identity.party_id_type"),
        _untyped_party_id_is_a_uri,
        "messages partners reject as Inconsistent (ebMS2 §3.1.1.1)",
    ),
    CrossRule(
        ("smtp.host", "smtp.from_address"),
        _mail_has_a_sender,
        "mails without a sender address, which relays refuse and partners cannot answer (ebMS2 B.3.2)",
    ),
    CrossRule(
        ("smtp.username", "smtp.password", "smtp.security"),
        _smtp_log_in_is_whole,
        "a relay log-in without its password, or a password sent in clear",
    ),
    CrossRule(
        ("amqp.enabled", "amqp.url"),
        _amqp_receiving_has_a_queue,
        "a receiver with no queue to receive from",
    ),
)
"""The rules that tie settings together, in the order their problems are reported."""


def cross_problems(values: Mapping[str, Any], label: Label, bad: Collection[str]) -> list[str]:
    """The problems the rules that tie settings together find (:data:`CROSS_RULES`, in order).

    ``values`` maps ``section.key`` to the effective value; ``label`` names a setting in a message; a rule
    is skipped when one of its settings already has a problem of its own (in ``bad``).
    """
    given = Given(values, label, bad)
    found = (rule.check(given) for rule in CROSS_RULES if given.usable(*rule.keys))
    return [problem for problem in found if problem]
