"""The settings file ``msh init`` writes (``msh.toml``): the settings a party needs, each with a comment, in
the style of ``samples/config/party-a.toml``; every other setting keeps its default (``msh serve
--print-settings`` shows them all)."""

from __future__ import annotations

import json
from typing import Final

__all__ = ["settings_text"]


def _toml(value: str) -> str:
    """``value`` as a TOML basic string (JSON's string escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


_TLS_LINES: Final = (
    "[tls]",
    'certificate = "keys/party.cert.pem"   # our certificate: TLS server and TLS client certificate',
    'private_key = "keys/party.key.pem"    # its private key (PEM); shown by path only',
    "trusted = []                          # extra trust anchors; the agreement names the partner's",
    "require_client_certificate = true     # mutual TLS: partners present the certificate the agreement names",
    "",
)


def settings_text(party_id: str, party_type: str | None, *, host: str, port: int, tls: bool, url: str) -> str:
    """The commented settings of party ``party_id`` listening on ``host:port`` for the endpoint ``url``."""
    type_line = (
        f"party_id_type = {_toml(party_type)}   # the PartyId's type attribute, as in the agreement"
        if party_type is not None
        else "# party_id_type: none, the PartyId is a URI"
    )
    domain = "".join(c if c.isalnum() or c in ".-" else "-" for c in party_id).strip("-.") or "party"
    lines = [
        f"# pymsh settings of party {party_id}, written by msh init. Endpoint: {url}",
        "#",
        "# Relative paths are read from this file's folder. Every setting can be overridden by an environment",
        "# variable MSH_<SECTION>_<KEY>, e.g. MSH_SERVER_PORT=8443 (MSH_CONFIG names this file instead of --config).",
        '# Durations are fixed-length xs:durations ("PT2S", "P1D") or numbers of seconds. msh serve --config',
        "# msh.toml --print-settings shows every setting, these and the defaults of the others.",
        "",
        "[identity]",
        f"party_id = {_toml(party_id)}   # our PartyId, as in the agreement",
        type_line,
        f"message_id_domain = {_toml(domain + '.msh')}   # our MessageIds are <random>@this",
        "",
        "[agreements]",
        'paths = ["agreements"]   # CPA files, or folders (every *.xml in them)',
        'reading = "strict"       # CPA/header disagreements: strict | header | header-warn | cpa-warn',
        "",
        "[store]",
        'url = "msh.sqlite"       # SQLite file in this folder; postgresql+psycopg://... for PostgreSQL',
        "",
        "[server]",
        f"host = {_toml(host)}   # address to listen on",
        f"port = {port}   # checked free by msh init; the agreement's endpoint for us is {url}",
        'path = "/msh"            # the URL path of that endpoint',
        f"tls = {'true' if tls else 'false'}   # serve HTTPS, as the agreement's TransportReceiver asks",
        '# pid_file = "msh.pid"   # msh serve writes its process id here; msh cpa add|remove|reload signal it',
        "",
    ]
    if tls:
        lines += _TLS_LINES
    lines += [
        "[security]",
        "# The agreement says what is signed and encrypted; these are the keys (the certificate the agreement",
        "# names for us). An encrypted PEM key's passphrase is read from the variable key_passphrase_env names.",
        'signing_key = "keys/party.key.pem"           # signs our messages and signed acknowledgments',
        'signing_certificate = "keys/party.cert.pem"  # its certificate (then its chain, leaf first)',
        'decryption_key = "keys/party.key.pem"        # decrypts payloads encrypted for us',
        "",
        "[sending]",
        'first_resend_timeout = "PT30S"   # wait before the first resend: not shorter than the RetryInterval',
        'http_timeout = "PT20S"           # wait for the answer (small bodies: whole exchange); < first_resend_timeout',
        'connect_timeout = "PT5S"         # opening a connection to the partner',
        "",
    ]
    return "\n".join(lines)
