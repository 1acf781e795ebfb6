"""Who is asking: applications authenticate with a bearer token (``Authorization: Bearer …``) or, over
mutual TLS, with a client certificate whose subject CN names them (``api.applications``, ``api.client_ca``).

Tokens are read once, when the MSH starts, from the environment variable or file the settings name; they
are never printed or logged, and compared in constant time.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from msh.api.problems import Problem
from msh.errors import ConfigurationError
from msh.runtime.config.api import Credential

__all__ = ["Applications", "load_applications"]


@dataclass(frozen=True)
class Applications:
    """The known applications: name -> bearer token (bytes), and whether client certificates count."""

    tokens: Mapping[str, bytes]
    certificates: bool = False

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.tokens)

    def token_of(self, name: str) -> bytes | None:
        """Application ``name``'s token (the webhook signing key), or None."""
        return self.tokens.get(name)

    def authenticate(self, authorization: str | None, client_certificate: bytes | None = None) -> str:
        """The application's name, or :class:`Problem` 401 (no or a wrong credential)."""
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                given = token.strip().encode("utf-8", "surrogateescape")
                found = None
                for name, expected in self.tokens.items():  # every one compared: no timing of which matched
                    if hmac.compare_digest(given, expected):
                        found = name
                if found is not None:
                    return found
                raise _unauthorized("the bearer token is not one of the applications' tokens")
        if self.certificates and client_certificate is not None:
            common_name = _common_name(client_certificate)
            if common_name is not None and (not self.tokens or common_name in self.tokens):
                return common_name
            raise _unauthorized(f"the client certificate's subject CN {common_name!r} names no application")
        raise _unauthorized("send Authorization: Bearer <token> (the application's token)")


def _unauthorized(detail: str) -> Problem:
    return Problem(401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": 'Bearer realm="msh"'})


def _common_name(der: bytes) -> str | None:
    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError:
        return None
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if names else None
    return value if isinstance(value, str) else None


def load_applications(
    credentials: Iterable[Credential],
    *,
    certificates: bool = False,
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    setting: str = "api.applications",
) -> Applications:
    """Read each application's token from its variable or file; :class:`ConfigurationError` (naming the
    application and where, never the token) when one is missing, empty or shared by two applications.
    ``setting`` names the setting in the messages (``admin.operators`` for the admin port's operators)."""
    environ = os.environ if env is None else env
    tokens: dict[str, bytes] = {}
    for credential in credentials:
        if credential.name in tokens:
            raise ConfigurationError(f"{setting}: {credential.name!r} is named twice; name each application once")
        if credential.source == "env":
            found = environ.get(credential.where)
            if found is None:
                raise ConfigurationError(
                    f"{setting}: the token of {credential.name!r} is to come from the environment variable "
                    f"{credential.where}, which is not set; set it (or name a file: {credential.name}=file:PATH)"
                )
            value = found
        else:
            path = Path(credential.where)
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            try:
                value = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigurationError(
                    f"{setting}: the token file of {credential.name!r} ({path}) cannot be read: {exc.strerror or exc}"
                ) from None
        token = value.strip()
        if len(token) < 16:
            raise ConfigurationError(
                f"{setting}: the token of {credential.name!r} ({credential.source}:{credential.where}) is "
                "shorter than 16 characters; use a long random one (e.g. python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
        encoded = token.encode("utf-8")
        for other, known in tokens.items():
            if hmac.compare_digest(encoded, known):
                raise ConfigurationError(
                    f"{setting}: {credential.name!r} and {other!r} have the same token; give each its own"
                )
        tokens[credential.name] = encoded
    return Applications(tokens, certificates)
