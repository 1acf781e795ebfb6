"""The MSH's settings: one TOML file, every setting overridable by an environment variable.

File
    Sections and keys are named exactly like the fields of :class:`Settings` and of its parts, where each
    setting is declared once (:mod:`msh.runtime.config.model`); ``msh serve --print-settings`` lists them
    all, the README's table says what each means. Samples: ``samples/config/party-a.toml`` and
    ``party-b.toml``; ``samples/config/multihop/`` for two parties and an intermediary.

    An unknown section or key, or a value of the wrong type, is an error naming it (typos do not pass
    silently). ``identity.party_id`` and ``store.url`` are required; everything else has a default.
    ``agreements.paths`` may be empty (a pure intermediary) only when there are routes: an MSH with
    neither agreements nor routes is refused.

Routing table
    ``[[routing.routes]]`` tables, one per route, in the order they are tried (the first matching route
    wins), each read into a :class:`msh.engine.routing.Route` (:attr:`Settings.routing`, a
    :class:`RoutingSettings`); :mod:`.routes` declares their keys. Routes come only from the file.

Environment
    ``MSH_<SECTION>_<KEY>`` (upper case) overrides ``<section>.<key>``, e.g. ``MSH_SERVER_PORT=8082``,
    ``MSH_SENDING_FIRST_RESEND_TIMEOUT=PT2S``; the environment wins over the file. Booleans are
    true/false/1/0/yes/no (any case); lists (``agreements.paths``, ``tls.trusted``) are ``os.pathsep``
    separated; an empty value unsets an optional setting (``MSH_TLS_CERTIFICATE=``). Any other variable
    starting ``MSH_`` is an error naming it (a misspelt override would otherwise be ignored; an
    ``MSH_ROUTING_...`` one is refused saying routes are configured in the file), except:
    ``MSH_CONFIG`` names the configuration file (read by :func:`load_settings` when it is given no path),
    ``MSH_VENV`` is the virtualenv folder of ``scripts/demo`` and ``scripts/test``, and ``MSH_TEST_*`` is
    left to the test suites (e.g. ``MSH_TEST_POSTGRES_URL``).

Values
    Durations are xs:duration strings (``"PT2S"``, ``"PT0.5S"``, ``"P1D"``; read by
    :func:`cpa.duration.parse_duration`, the agreements' own xs:duration reader) or a number of seconds (a
    TOML number, or a decimal number in the environment); negative ones are refused. Every setting's
    duration has a fixed length: one counting months or years (``"P1M"``) is refused with a message saying
    so. They are timeouts, leases, poll intervals and clock tolerances, waits measured in seconds; and
    ``sending.first_resend_timeout`` must be compared with ``sending.http_timeout``, which only a fixed
    length can be. (An agreement's RetryInterval and PersistDuration may count months: :mod:`cpa.duration`.)
    A route's ``retry_interval`` and ``persist_duration`` are xs:durations like an agreement's, which may
    count months, or seconds; not negative.

    Relative paths (``agreements.paths``, ``tls.*``, a route's ``trusted``, and ``store.url`` when it is a
    plain path or ``sqlite:///relative``) are read from the folder of the configuration file, whether they
    come from the file or from the environment; without a file, from the current folder. Agreement paths,
    TLS files and a route's certificate files must exist (and the TLS and certificate files hold what they
    should) when the settings are loaded.

Errors
    Every problem found is reported, each on its own line, in one :class:`SettingsError` (a
    :class:`~msh.errors.ConfigurationError`); each line names the setting, where its value came from (the
    file or the environment variable) and what to write instead.

Modules
    :mod:`.model` declares the settings (a frozen dataclass per section, a field per setting, see
    :mod:`.declaration`); :mod:`.routes` declares and reads the routing table's rows; :mod:`.values` reads
    each type of value; :mod:`.rules` holds the checks and the rules that tie settings together;
    :mod:`.sources` reads the file and the environment; :mod:`.describing` writes the settings out.

Why our own code
    A settings library was weighed against these modules (the README's "Why the settings are read by our
    own code" has the comparison). pydantic-settings reads the same file and variables, but its messages
    name neither the variable nor the file a value came from, nor say what to write, and it accepts what
    ours refuses: ``port = "8081"``, ``max_in_flight = true`` (as 1), ``"P1M"`` (as 30 days), misspelt
    ``MSH_`` variables (ignored). For ``MSH_SERVER_PORT=eighty`` ours says::

        server.port (from MSH_SERVER_PORT): 'eighty' is not an integer; write a port number 1-65535 (0: any free port)

    and pydantic-settings says::

        server.port
          Input should be a valid integer, unable to parse string as an integer [type=int_parsing, ...]

    Keeping our messages meant reading both sources with our own code and translating the library's errors
    back: it would have replaced about 60 lines (the type checks of TOML values) and added a dependency,
    while the checks, the cross-setting rules, the TLS file checks, the routing table and the descriptions
    stay ours either way.
"""

from msh.runtime.config.declaration import SettingsError
from msh.runtime.config.describing import describe, route_keys_table, settings_table
from msh.runtime.config.model import (
    SETTINGS,
    AgreementSettings,
    IdentitySettings,
    ReceivingSettings,
    RetentionSettings,
    RoutingSettings,
    SecuritySettings,
    SendingSettings,
    ServerSettings,
    Settings,
    StoreSettings,
    TimerSettings,
    TlsSettings,
)
from msh.runtime.config.routes import ROUTE_KEYS, RouteKeys
from msh.runtime.config.sources import CONFIG_ENV, load_settings, settings_from_mapping

__all__ = [
    "CONFIG_ENV",
    "ROUTE_KEYS",
    "SETTINGS",
    "AgreementSettings",
    "IdentitySettings",
    "ReceivingSettings",
    "RouteKeys",
    "RoutingSettings",
    "SecuritySettings",
    "SendingSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "StoreSettings",
    "RetentionSettings",
    "TimerSettings",
    "TlsSettings",
    "describe",
    "load_settings",
    "route_keys_table",
    "settings_from_mapping",
    "settings_table",
]
