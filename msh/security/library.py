"""python-xmlsec (libxmlsec1), loaded once and checked: the XML-DSig and XML Encryption engine (docs/design.md §7).

* **One libxml2.** lxml and xmlsec each carry a libxml2; the trees lxml builds are handed to xmlsec, so both
  must run on the same build, or libxml2 structures are misread (wrong results, crashes). xmlsec refuses to
  import when they differ; :func:`library_versions` tells what each was built with and runs on, and an
  import failure becomes a :class:`~msh.errors.ConfigurationError` that says how to repair the installation.
* **I/O only to the message's own parts.** libxmlsec resolves a Reference URI through its I/O callbacks;
  the default ones open files and URLs, so a hostile Reference could make the MSH read a local file or
  fetch a URL. They are removed, and the only callbacks left resolve URIs to the payload parts of the
  message being signed or verified (:func:`resolving_parts`, one set of parts per thread), as the profile
  needs (ebMS2 §4.1.3: "a URI attribute resolving to the payload object"): ``cid:`` URIs when signing, and
  exactly the URIs :mod:`msh.security.references` resolved when verifying (a ``cid:`` URI or a part's
  Content-Location).
* **Keys.** :func:`private_key` and :func:`public_key` turn ``cryptography`` keys and certificates into
  xmlsec keys; :func:`transform` finds the xmlsec transform of an algorithm URI.
"""

from __future__ import annotations

import contextlib
import io
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, TypeAlias, cast, runtime_checkable

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from lxml import etree

from msh.errors import ConfigurationError
from msh.security.keys import PrivateKey

__all__ = [
    "LibraryVersions",
    "Openable",
    "Payload",
    "PartsInUse",
    "PrivateKey",
    "bare_content_id",
    "library_versions",
    "private_key",
    "public_key",
    "resolving_parts",
    "restrict_transforms",
    "transform",
    "xmlsec",
]

_REPAIR = (
    "reinstall them as a matching pair: run `bash scripts/test` (it rebuilds .venv), or "
    "`pip install --force-reinstall --no-binary lxml,xmlsec lxml xmlsec` to build both against the "
    "system libxml2 (needs libxml2-dev, libxmlsec1-dev, libxslt1-dev and pkg-config)"
)

try:
    import xmlsec
except ImportError as exc:  # not installed, or xmlsec's own check: lxml & xmlsec libxml2 version mismatch
    raise ConfigurationError(f"python-xmlsec cannot be loaded ({exc}); {_REPAIR}") from exc
except Exception as exc:  # xmlsec.InternalError at import when lxml and xmlsec run on different libxml2 builds
    raise ConfigurationError(
        f"python-xmlsec cannot be loaded ({exc}): lxml runs on libxml2 "
        f"{'.'.join(map(str, etree.LIBXML_VERSION))} and xmlsec on another build; {_REPAIR}"
    ) from exc


@runtime_checkable
class Openable(Protocol):
    """A payload that can be read more than once: ``open()`` gives a new reader at its start
    (:class:`msh.ebms.mime.PartBody` is one)."""

    def open(self) -> BinaryIO: ...


Payload: TypeAlias = bytes | Openable | BinaryIO
"""A payload part's content (after any Content-Transfer-Encoding): bytes, something with ``open()``, or a
seekable binary reader (read from its start each time it is needed)."""


@dataclass(frozen=True, slots=True)
class LibraryVersions:
    """Which libxml2 lxml and xmlsec were built with and run on, and the libxmlsec1 version."""

    lxml_compiled: tuple[int, ...]
    lxml_runtime: tuple[int, ...]
    xmlsec_compiled: tuple[int, ...]
    xmlsec_runtime: tuple[int, ...]
    libxmlsec: tuple[int, ...]

    @property
    def compatible(self) -> bool:
        """True when lxml and xmlsec run on the same libxml2 (and each on the one it was built with)."""
        return self.lxml_runtime == self.xmlsec_runtime == self.lxml_compiled == self.xmlsec_compiled

    def __str__(self) -> str:
        def v(t: tuple[int, ...]) -> str:
            return ".".join(map(str, t))

        return (
            f"lxml: libxml2 {v(self.lxml_runtime)} (built with {v(self.lxml_compiled)}); xmlsec: libxml2 "
            f"{v(self.xmlsec_runtime)} (built with {v(self.xmlsec_compiled)}), libxmlsec1 {v(self.libxmlsec)}"
        )


def library_versions() -> LibraryVersions:
    """The libxml2 versions lxml and xmlsec were built with and run on."""
    return LibraryVersions(
        tuple(etree.LIBXML_COMPILED_VERSION),
        tuple(etree.LIBXML_VERSION),
        tuple(xmlsec.get_libxml_compiled_version()),
        tuple(xmlsec.get_libxml_version()),
        tuple(xmlsec.get_libxmlsec_version()),  # type: ignore[attr-defined]  # not in its type stubs
    )


_versions = library_versions()
if not _versions.compatible:
    raise ConfigurationError(f"lxml and xmlsec do not run on the same libxml2 ({_versions}); {_REPAIR}")


XmlsecTransform: TypeAlias = Any
"""An ``xmlsec.constants.Transform*`` value (its stubs do not export the class)."""


def transform(uri: str) -> XmlsecTransform:
    """The xmlsec transform whose URI is ``uri``; :class:`ConfigurationError` when libxmlsec has none."""
    found = _TRANSFORMS.get(uri)
    if found is None:
        raise ConfigurationError(f"algorithm {uri!r} is not available in libxmlsec1 {_versions.libxmlsec}")
    return found


_TRANSFORMS: dict[str, XmlsecTransform] = {}
for _name in dir(xmlsec.constants):
    _value = getattr(xmlsec.constants, _name)
    if _name.startswith("Transform") and getattr(_value, "href", None):
        _TRANSFORMS.setdefault(_value.href, _value)


def restrict_transforms(context: xmlsec.SignatureContext, *signature_methods: str) -> xmlsec.SignatureContext:
    """Let ``context`` run only the canonicalisations, the profile's Transforms (enveloped-signature, XPath),
    the digests and the SignatureMethods the MSH knows, plus ``signature_methods``: never XSLT or XPointer,
    whatever a received signature asks for (XML-DSig §6.6, §8.1.1)."""
    from msh.security.algorithms import CanonicalizationMethod, DigestAlgorithm, SignatureAlgorithm, Transform

    for uri in (*CanonicalizationMethod, *Transform, *DigestAlgorithm):
        context.enable_reference_transform(transform(uri))
    for uri in (*CanonicalizationMethod, *SignatureAlgorithm, *signature_methods):
        context.enable_signature_transform(transform(uri))
    return context


# ------------------------------------------------------------------------------------------------ keys


def private_key(key: PrivateKey, certificate: x509.Certificate | None = None) -> xmlsec.Key:
    """``key`` (with ``certificate`` attached, for a KeyInfo) as an xmlsec key."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    loaded = xmlsec.Key.from_memory(pem, xmlsec.constants.KeyDataFormatPem)
    if certificate is not None:
        loaded.load_cert_from_memory(
            certificate.public_bytes(serialization.Encoding.PEM), xmlsec.constants.KeyDataFormatCertPem
        )
    return loaded


def public_key(certificate: x509.Certificate) -> xmlsec.Key:
    """The public key of ``certificate`` as an xmlsec key (for verifying and for key transport)."""
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    return xmlsec.Key.from_memory(pem, xmlsec.constants.KeyDataFormatCertPem)


# -------------------------------------------------------------------------------------- cid: resolution


def bare_content_id(value: str) -> str:
    """A Content-ID without ``cid:`` and angle brackets, URL escapes decoded (RFC 2392: ``cid:`` URLs are
    the Content-ID, %-escaped)."""
    value = value.strip()
    if value[:4].lower() == "cid:":
        value = urllib.parse.unquote(value[4:])
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1]
    return value


@dataclass(slots=True)
class PartsInUse:
    """The payload parts the current thread's signing or verification may read (``uris``, when given: the
    only URIs that open, each to the Content-ID of its part), and which it asked for."""

    parts: Mapping[str, Payload]
    uris: Mapping[str, str] | None = None
    requested: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def content_id(self, uri: str) -> str | None:
        """The Content-ID of the part ``uri`` opens, None when it opens nothing."""
        if self.uris is not None:
            return self.uris.get(uri)
        return bare_content_id(uri) if uri[:4].lower() == "cid:" else None


_current = threading.local()


@contextlib.contextmanager
def resolving_parts(parts: Mapping[str, Payload], uris: Mapping[str, str] | None = None) -> Iterator[PartsInUse]:
    """Within the block, libxmlsec in this thread resolves ``cid:`` URIs to ``parts`` (keys: Content-IDs,
    with or without ``cid:`` and brackets), or, when ``uris`` is given, exactly the URIs it maps, each to
    the part with that Content-ID (:meth:`msh.security.references.Resolution.uri_table`); every other URI
    fails to open."""
    previous = getattr(_current, "parts", None)
    use = PartsInUse({bare_content_id(k): v for k, v in parts.items()}, uris)
    _current.parts = use
    try:
        yield use
    finally:
        _current.parts = previous


def _in_use() -> PartsInUse | None:
    found: PartsInUse | None = getattr(_current, "parts", None)
    return found


def _match(uri: bytes) -> bool:
    use = _in_use()
    if use is None:
        return False
    cid = use.content_id(uri.decode("utf-8", "replace"))
    if cid is None:
        return False
    use.requested.append(cid)
    if cid not in use.parts:
        use.missing.append(cid)
        return False
    return True


def _open(uri: bytes) -> BinaryIO:
    use = _in_use()
    assert use is not None  # _match said yes in this thread
    cid = use.content_id(uri.decode("utf-8", "replace"))
    assert cid is not None  # _match said yes for this URI
    source = use.parts[cid]
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source))
    if isinstance(source, Openable):
        return source.open()
    source.seek(0)
    return cast(BinaryIO, _Borrowed(source))


def _read(reader: Any, buffer: memoryview) -> int:
    data = reader.read(len(buffer))
    buffer[: len(data)] = data
    return len(data)


def _close(reader: Any) -> None:
    reader.close()


class _Borrowed(io.RawIOBase):
    """A caller's reader lent to libxmlsec: read through, never closed by it."""

    def __init__(self, inner: BinaryIO) -> None:
        super().__init__()
        self._inner = inner

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


# Once per process: no file or network access for libxmlsec, only the current message's parts.
xmlsec.cleanup_callbacks()
xmlsec.register_callbacks(_match, _open, _read, _close)
