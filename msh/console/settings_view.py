"""The settings in force, as the settings page shows them: each ``section.key`` with its value written as
``msh serve --print-settings`` writes it (files by path only, the store URL's password as ``***``), where a
secret could show masked, and the routing table (the multi-hop routes, in the order they are tried)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from msh.runtime.config import SETTINGS, Settings
from msh.runtime.config.model import values_of

__all__ = ["MASK", "RouteRow", "SettingRow", "is_secret", "mask", "route_rows", "setting_rows"]

MASK: Final = "••••••"
_SECRET_KEY: Final = re.compile(r"(token|password|passwd|passphrase|secret|credential)(?!_env$)", re.IGNORECASE)
"""A key that holds a secret itself (one ending ``_env`` names the environment variable that holds it)."""
_URL_PASSWORD: Final = re.compile(r"(://[^/:@\s\"]*:)[^@/\s\"]+@")
_INLINE_SECRET: Final = re.compile(r"(?i)\b(token|password|passwd|secret|apikey|api_key)=(?!env:|file:)[^\s,;\"&\]]+")


@dataclass(frozen=True, slots=True)
class SettingRow:
    section: str
    key: str
    value: str
    env: str
    meaning: str
    masked: bool


@dataclass(frozen=True, slots=True)
class RouteRow:
    position: int
    name: str
    matches: str
    next_hop: str
    next_hop_party: str
    hop_ack: bool
    resends: str
    trusted: str


def is_secret(key: str) -> bool:
    """Whether a setting named ``key`` holds a secret value (token, password, passphrase...)."""
    return _SECRET_KEY.search(key) is not None


def mask(text: str) -> str:
    """``text`` with every password of a URL and every ``token=…``/``password=…`` value masked (references to an
    environment variable or a file, ``env:NAME``/``file:PATH``, are not secrets and stay)."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    return _INLINE_SECRET.sub(lambda m: m.group(1) + "=" + MASK, text)


def setting_rows(settings: Settings) -> list[SettingRow]:
    """Every setting in declaration order, secrets masked."""
    values = values_of(settings)
    rows = []
    for d in SETTINGS:
        value = values[d.name]
        shown = "(not set)" if value is None else d.kind.show(value)
        secret = value is not None and is_secret(d.key)
        masked_text = MASK if secret else mask(shown)
        rows.append(SettingRow(d.section, d.key, masked_text, d.env, d.meaning, secret or masked_text != shown))
    return rows


def route_rows(settings: Settings) -> list[RouteRow]:
    """The routing table (``[[routing.routes]]``), in the order routes are tried (the first match wins)."""
    rows = []
    for position, route in enumerate(settings.routing.routes, start=1):
        matches = [f"To {route.to_party_id}" + (f" ({route.to_party_id_type})" if route.to_party_id_type else "")]
        matches += [
            f"{label} {value}"
            for label, value in (("CPA", route.cpa_id), ("service", route.service), ("action", route.action))
            if value
        ]
        party = (
            "the To party itself" if route.next_hop_party is None else " ".join(p for p in route.next_hop_party if p)
        )
        persist = "" if route.persist_duration is None else f", persist {route.persist_duration}"
        rows.append(
            RouteRow(
                position,
                route.name,
                ", ".join(matches),
                mask(route.next_hop),
                party,
                route.hop_ack,
                f"{route.retries} retries every {route.retry_interval}{persist}",
                ", ".join(route.trusted) or "tls.trusted",
            )
        )
    return rows
