"""Settings written out: the effective settings (``msh serve --print-settings``) and the README's table."""

from __future__ import annotations

from msh.runtime.config.model import SETTINGS, Settings, values_of
from msh.runtime.config.routes import describe_routes, route_keys_table

__all__ = ["describe", "route_keys_table", "settings_table"]


def describe(settings: Settings) -> str:
    """The effective settings, one ``section.key = value`` line each (TOML-like values), then the routing
    table, one ``routing.routes[N] = ...`` line per route (``routing.routes = (none)`` without routes).

    Files are shown by path only (never their contents, so no key material), and a password in the store
    URL is shown as ``***``.
    """
    values = values_of(settings)
    lines = [f"{d.name} = {'(not set)' if values[d.name] is None else d.kind.show(values[d.name])}" for d in SETTINGS]
    return "\n".join([*lines, *describe_routes(settings.routing.routes)])


def settings_table() -> str:
    """The README's table of the settings (Markdown): each setting, its default and its meaning."""
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    for d in SETTINGS:
        lines.append(f"| `{d.name}` | {d.table_default} | {d.meaning} |")
    return "\n".join(lines) + "\n"
