"""The MSH's settings: one TOML file, every setting overridable by an environment variable.

File
    Sections and keys are named exactly like the fields of :class:`Settings` and of its parts, where each
    setting is declared once (:mod:`msh.runtime.config.model`); ``msh serve --print-settings`` lists them
    all, the README's table says what each means. Samples: ``samples/config/party-a.toml`` and
    ``party-b.toml``.

    An unknown section or key, or a value of the wrong type, is an error naming it (typos do not pass
    silently). ``identity.party_id``, ``agreements.paths`` and ``store.url`` are required; everything else
    has a default.

Environment
    ``MSH_<SECTION>_<KEY>`` (upper case) overrides ``<section>.<key>``, e.g. ``MSH_SERVER_PORT=8082``,
    ``MSH_SENDING_FIRST_RESEND_TIMEOUT=PT2S``; the environment wins over the file. Booleans are
    true/false/1/0/yes/no (any case); lists (``agreements.paths``, ``tls.trusted``) are ``os.pathsep``
    separated; an empty value unsets an optional setting (``MSH_TLS_CERTIFICATE=``). Any other variable
    starting ``MSH_`` is an error naming it (a misspelt override would otherwise be ignored), except:
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
    Relative paths (``agreements.paths``, ``tls.*``, and ``store.url`` when it is a plain path or ``sqlite:///relative``)
    are read from the folder of the configuration file, whether they come from the file or from the
    environment; without a file, from the current folder. Agreement paths and TLS files must exist (and
    the TLS files hold what they should) when the settings are loaded.

Errors
    Every problem found is reported, each on its own line, in one :class:`SettingsError` (a
    :class:`~msh.errors.ConfigurationError`); each line names the setting, where its value came from (the
    file or the environment variable) and what to write instead.

Modules
    :mod:`.model` declares the settings (a frozen dataclass per section, a field per setting, see
    :mod:`.declaration`); :mod:`.values` reads each type of value; :mod:`.rules` holds the checks and the
    rules that tie settings together; :mod:`.sources` reads the file and the environment;
    :mod:`.describing` writes the settings out.
"""

from msh.runtime.config.declaration import SettingsError
from msh.runtime.config.describing import describe, settings_table
from msh.runtime.config.model import (
    SETTINGS,
    AgreementSettings,
    IdentitySettings,
    ReceivingSettings,
    SendingSettings,
    ServerSettings,
    Settings,
    StoreSettings,
    TimerSettings,
    TlsSettings,
)
from msh.runtime.config.sources import CONFIG_ENV, load_settings, settings_from_mapping

__all__ = [
    "CONFIG_ENV",
    "SETTINGS",
    "AgreementSettings",
    "IdentitySettings",
    "ReceivingSettings",
    "SendingSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "StoreSettings",
    "TimerSettings",
    "TlsSettings",
    "describe",
    "load_settings",
    "settings_from_mapping",
    "settings_table",
]
