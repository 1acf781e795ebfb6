"""Reading the settings: the TOML file, then the ``MSH_<SECTION>_<KEY>`` environment variables over it.

Both sources are read against the one declaration of the settings (:data:`.model.SETTINGS`): a section,
key or ``MSH_`` variable it does not declare is refused with the closest declared name ("did you mean").
The routing table (``[[routing.routes]]``) is read from the file only (:mod:`.routes`); an
``MSH_ROUTING_...`` variable is refused. Every problem found is collected and reported in one
:class:`~.declaration.SettingsError`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from msh.runtime.config.cross_rules import cross_problems
from msh.runtime.config.declaration import ENV_PREFIX, Declared, SettingsError
from msh.runtime.config.model import SECTIONS, SETTINGS, RoutingSettings, Settings
from msh.runtime.config.routes import ROUTES, ROUTING, read_routes
from msh.runtime.config.rules import Label, tls_problems
from msh.runtime.config.values import Invalid, did_you_mean, type_name

__all__ = ["CONFIG_ENV", "load_settings", "settings_from_mapping"]

CONFIG_ENV: Final = "MSH_CONFIG"
"""The environment variable naming the configuration file (not a setting)."""

_TEST_ENV_PREFIX: Final = "MSH_TEST_"  # left to the test suites (MSH_TEST_POSTGRES_URL)
_NOT_SETTINGS: Final = frozenset({CONFIG_ENV, "MSH_VENV"})  # MSH_VENV: scripts/_env.sh's virtualenv folder
_ENV_SOURCE: Final = "<environment>"

_KEYS: Final[dict[str, dict[str, Declared]]] = {cls.section: {} for cls in SECTIONS}
for _declared in SETTINGS:
    _KEYS[_declared.section][_declared.key] = _declared
_SECTION_NAMES: Final = [*_KEYS, ROUTING]  # the order of Settings' fields


@dataclass(frozen=True, slots=True)
class _Raw:
    """A value as a source gives it, before it is read."""

    value: object
    origin: str  # the configuration file or the environment variable
    from_env: bool


def _read_file_values(data: Mapping[str, Any], source: str, raw: dict[str, _Raw], problems: list[str]) -> None:
    sections = _SECTION_NAMES
    for section, table in data.items():
        if section == ROUTING:  # read_routes
            continue
        if section not in _KEYS:
            problems.append(
                f"[{section}] (in {source}) is not a settings section{did_you_mean(section, sections)}; "
                f"the sections are {', '.join(f'[{s}]' for s in sections)}"
            )
            continue
        keys = list(_KEYS[section])
        if not isinstance(table, Mapping):
            problems.append(
                f"{section} (in {source}) is {type_name(table)}, not a section; write it as [{section}] "
                f"followed by its keys ({', '.join(keys)})"
            )
            continue
        for key, value in table.items():
            if key not in _KEYS[section]:
                problems.append(
                    f"{section}.{key} (in {source}) is not a setting{did_you_mean(key, keys)}; "
                    f"the keys of [{section}] are {', '.join(keys)}"
                )
                continue
            raw[f"{section}.{key}"] = _Raw(value, source, False)


def _read_env_values(env: Mapping[str, str], raw: dict[str, _Raw], problems: list[str]) -> None:
    sections = [s.upper() for s in _KEYS]
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in _NOT_SETTINGS or name.startswith(_TEST_ENV_PREFIX):
            continue
        section, _, key = name[len(ENV_PREFIX) :].partition("_")
        section, key = section.lower(), key.lower()
        if section == ROUTING:
            problems.append(
                f"{name} (environment): routes cannot come from the environment; they are configured in the "
                f"configuration file, one [[{ROUTING}.{ROUTES}]] table per route; unset {name}"
            )
            continue
        if section not in _KEYS:
            problems.append(
                f"{name} (environment) names no setting: {section.upper()!r} is not a settings section"
                f"{did_you_mean(section.upper(), sections)}; write MSH_<SECTION>_<KEY> with SECTION one of "
                f"{', '.join(sections)} ({CONFIG_ENV} names the configuration file), or unset {name}"
            )
            continue
        if key not in _KEYS[section]:
            names = [d.env for d in _KEYS[section].values()]
            problems.append(
                f"{name} (environment) names no setting{did_you_mean(name, names)}; the settings of "
                f"[{section}] are {', '.join(names)}"
            )
            continue
        raw[f"{section}.{key}"] = _Raw(env[name], name, True)


def settings_from_mapping(
    data: Mapping[str, Any], *, base_dir: Path, source: str, env: Mapping[str, str] | None = None
) -> Settings:
    """The settings from an already parsed TOML mapping, with the environment's overrides applied.

    ``base_dir`` is the folder relative paths are read from, ``source`` names where ``data`` came from (for
    messages and :attr:`Settings.source`), ``env`` is the environment (None: ``os.environ``; pass ``{}``
    for none). Raises :class:`SettingsError` listing every problem.
    """
    env = os.environ if env is None else env
    base_dir = Path(base_dir).absolute()
    problems: list[str] = []
    raw: dict[str, _Raw] = {}
    _read_file_values(data, source, raw, problems)
    _read_env_values(env, raw, problems)
    bad: set[str] = set()
    values = _defaults(raw, problems, bad)
    label = _labels(raw)
    values.update(_read_values(raw, base_dir, label, problems, bad))
    problems.extend(tls_problems(values, label, bad))
    routes, route_problems = read_routes(data[ROUTING], source, base_dir) if ROUTING in data else ((), [])
    problems.extend(route_problems)
    values["routing.routes"] = routes
    if route_problems:
        bad.add("routing.routes")
    problems.extend(cross_problems(values, label, bad))
    if problems:
        raise SettingsError(source, problems)
    parts: dict[str, Any] = {
        cls.section: cls(**{d.key: values[d.name] for d in SETTINGS if d.section == cls.section}) for cls in SECTIONS
    }
    return Settings(**parts, routing=RoutingSettings(routes), source=source)


def _defaults(raw: Mapping[str, _Raw], problems: list[str], bad: set[str]) -> dict[str, Any]:
    """The default of every setting that has one; a required setting no source gives is a problem (and bad)."""
    values: dict[str, Any] = {}
    for d in SETTINGS:
        if not d.required:
            values[d.name] = d.default
        elif d.name not in raw:
            bad.add(d.name)
            problems.append(
                f"{d.name} is required; set {d.key} in [{d.section}] of the configuration file "
                f"or the environment variable {d.env}"
            )
    return values


def _labels(raw: Mapping[str, _Raw]) -> Label:
    """How the messages name a setting: with the file or variable its value came from, or ``(default)``."""

    def label(setting: str) -> str:
        found = raw.get(setting)
        return f"{setting} (from {found.origin})" if found else f"{setting} (default)"

    return label


def _read_values(
    raw: Mapping[str, _Raw], base_dir: Path, label: Label, problems: list[str], bad: set[str]
) -> dict[str, Any]:
    """The values the sources give, read, with their paths resolved, checked and verified; a value with a
    problem is left out (and its setting is bad)."""
    values: dict[str, Any] = {}
    for d in SETTINGS:  # in declaration order, for a readable report
        found = raw.get(d.name)
        if found is None:
            continue
        try:
            value = d.read(found.value, from_env=found.from_env)
        except Invalid as exc:
            problems.append(f"{label(d.name)}: {exc}")
            bad.add(d.name)
            continue
        if value is not None:
            value = d.kind.resolve(value, base_dir)
        problem = d.problem(value) or (None if value is None else d.kind.verify(value, base_dir))
        if problem:
            problems.append(f"{label(d.name)}: {problem}")
            bad.add(d.name)
            continue
        values[d.name] = value
    return values


def load_settings(path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Read the TOML file at ``path`` (None: the file named by the environment variable ``MSH_CONFIG``; no
    file at all: only environment variables), then apply the environment's overrides, then validate.

    ``env`` is the environment (None: ``os.environ``). Relative paths are read from the file's folder (the
    current folder without a file). Raises :class:`SettingsError` listing every problem found.
    """
    env = os.environ if env is None else env
    named_by = ""
    if path is None and env.get(CONFIG_ENV, "").strip():
        path, named_by = env[CONFIG_ENV].strip(), f" (named by {CONFIG_ENV})"
    if path is None:
        return settings_from_mapping({}, base_dir=Path.cwd(), source=_ENV_SOURCE, env=env)
    file = Path(path).expanduser().absolute()
    source = str(file)

    def refused(what: str) -> SettingsError:
        return SettingsError(source, [f"the configuration file {source!r}{named_by} {what}"])

    try:
        with file.open("rb") as stream:
            data = tomllib.load(stream)
    except FileNotFoundError:
        raise refused("does not exist; give the path of a TOML file") from None
    except OSError as exc:
        raise refused(f"cannot be read ({exc.strerror}); fix its path") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise refused(f"is not valid TOML: {exc}; correct it there") from None
    return settings_from_mapping(data, base_dir=file.parent, source=source, env=env)
