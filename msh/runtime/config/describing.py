"""Settings written out: the effective settings (``msh serve --print-settings``) and the README's table."""

from __future__ import annotations

from msh.runtime.config.model import SETTINGS, Settings, values_of

__all__ = ["describe", "settings_table"]


def describe(settings: Settings) -> str:
    """The effective settings, one ``section.key = value`` line each (TOML-like values).

    Files are shown by path only (never their contents, so no key material), and a password in the store
    URL is shown as ``***``.
    """
    values = values_of(settings)
    return "\n".join(
        f"{d.name} = {'(not set)' if values[d.name] is None else d.kind.show(values[d.name])}" for d in SETTINGS
    )


def settings_table() -> str:
    """The README's table of the settings (Markdown): each setting, its default and its meaning."""
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    for d in SETTINGS:
        if d.required:
            default = "required"
        elif d.default is None:
            default = d.unset
        else:
            default = "`" + d.kind.show(d.default).strip('"') + "`"
        lines.append(f"| `{d.name}` | {default} | {d.meaning} |")
    return "\n".join(lines) + "\n"
