"""The ``ds:Signature`` of the ebMS 2.0 profile written as text (ebMS2 §4.1.3, XML-DSig §4).

:func:`msh.security.profile.signature_template` builds the signature with lxml, libxmlsec or
:mod:`msh.security.fast_signing` fills it in, and C14N 1.0 gives the canonical SignedInfo that the
SignatureValue signs. For the signatures :mod:`msh.security.fast_signing` writes as text, this module writes
the same two texts straight away from the digests:

* :func:`canonical_signed_info`: what ``etree.tostring(signed_info, method="c14n")`` gives for that
  template (and libxmlsec canonicalises): the ``ds:SignedInfo`` start tag carries every namespace declared
  in scope at the SOAP Header plus ``ds``, sorted by prefix (the default namespace first), since an
  element alone in the canonical form of a document subset keeps every namespace node in its scope
  (C14N 1.0 §2.3, §4.7); empty elements have an end tag; the ``ds:XPath`` element carries the ``SOAP``
  declaration that the template puts on it when the Header's scope does not bind ``SOAP`` to the SOAP
  envelope namespace;
* :func:`signature`: what ``etree.tostring`` writes for the signed ``ds:Signature`` in the document: a
  ``xmlns:ds`` declaration on ``ds:Signature`` only when ``ds`` is not bound to XML-DSig in the Header's
  scope (lxml declares a prefix again only then), the same ``SOAP`` declaration on ``ds:XPath``, empty
  elements closed with ``/>``, the KeyInfo after the SignatureValue.

:func:`form` says whether a Header's namespace scope is one these texts are exact for, else None (the
tree is built then): not when XML-DSig is bound to another prefix than ``ds`` (lxml could then reuse that
prefix for the KeyInfo), the ``xml`` prefix or an empty namespace name is declared, or a namespace name
holds a character that serialisation or C14N would escape or quote otherwise. A Reference URI is written
as it is only when it holds printable ASCII without ``"``, ``&``, ``<`` or ``>`` (:func:`plain_uri`),
which both writers leave as it is. The tests compare these texts with the tree's and libxmlsec's, byte for
byte, over varied scopes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from msh.ebms.namespaces import SOAP_ENV, XMLDSIG
from msh.security.algorithms import EBMS_XPATH, CanonicalizationMethod, DigestAlgorithm, SignatureAlgorithm, Transform

__all__ = ["SignatureForm", "canonical_signed_info", "form", "key_info", "plain_uri", "signature"]

# Characters both libxml2's serialisation and C14N write as they are, in an attribute value and in a
# namespace declaration (printable ASCII but the quote and the markup characters).
_PLAIN_URI: Final = re.compile(r"[ !#-%'-;=?-~]*")
_XPATH_ESCAPES: Final = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


@dataclass(frozen=True, slots=True)
class SignatureForm:
    """How the signature is written under one SOAP Header's namespace scope."""

    in_scope: str
    """The namespace declarations of the canonical ``ds:SignedInfo`` start tag, each with its leading space."""
    ds_declared: bool
    """Whether ``ds:Signature`` declares ``xmlns:ds`` (``ds`` is not bound to XML-DSig in the Header's scope)."""
    soap_declared: bool
    """Whether ``ds:XPath`` declares ``xmlns:SOAP`` (``SOAP`` is not bound to the SOAP envelope namespace)."""


def plain_uri(uri: str) -> bool:
    """Whether ``uri`` is written the same, unescaped, by serialisation and by C14N."""
    return _PLAIN_URI.fullmatch(uri) is not None


@functools.lru_cache(maxsize=64)
def form(scope: frozenset[tuple[str | None, str]]) -> SignatureForm | None:
    """The form of the signature under a SOAP Header whose in-scope namespaces are ``scope`` (prefix, namespace
    name; ``None`` for the default namespace), or None when the texts of this module would not be exact
    (see the module docs). The same few scopes come back with every message, so each is worked out once."""
    bound = dict(scope)
    if "xml" in bound or any(uri == XMLDSIG and prefix != "ds" for prefix, uri in scope):
        return None
    if any(not uri or not plain_uri(uri) for uri in bound.values()):
        return None
    ds_declared = bound.get("ds") != XMLDSIG
    bound["ds"] = XMLDSIG
    # C14N 1.0 §4.7: namespace nodes in the lexicographic order of their local names, the default first.
    in_scope = "".join(
        f' xmlns="{uri}"' if prefix is None else f' xmlns:{prefix}="{uri}"'
        for prefix, uri in sorted(bound.items(), key=lambda item: item[0] or "")
    )
    return SignatureForm(in_scope, ds_declared, bound.get("SOAP") != SOAP_ENV)


def _empty(name: str, algorithm: str, canonical: bool) -> str:
    if canonical:
        return f'<ds:{name} Algorithm="{algorithm}"></ds:{name}>'
    return f'<ds:{name} Algorithm="{algorithm}"/>'


@functools.lru_cache(maxsize=64)
def _parts(
    method: SignatureAlgorithm, digest: DigestAlgorithm, xpath_filter: bool, soap_declared: bool, canonical: bool
) -> tuple[str, str, str]:
    """The fixed texts of a SignedInfo: its methods, the envelope Reference's Transforms and the DigestMethod
    (as :func:`msh.security.profile.signature_template` orders them)."""
    methods = _empty("CanonicalizationMethod", CanonicalizationMethod.C14N, canonical) + _empty(
        "SignatureMethod", method, canonical
    )
    transforms = _empty("Transform", Transform.ENVELOPED_SIGNATURE, canonical)
    if xpath_filter:
        expression = EBMS_XPATH
        for character, escape in _XPATH_ESCAPES:
            expression = expression.replace(character, escape)
        declaration = f' xmlns:SOAP="{SOAP_ENV}"' if soap_declared else ""
        transforms += (
            f'<ds:Transform Algorithm="{Transform.XPATH}"><ds:XPath{declaration}>{expression}</ds:XPath></ds:Transform>'
        )
    transforms += _empty("Transform", CanonicalizationMethod.C14N, canonical)
    return methods, f"<ds:Transforms>{transforms}</ds:Transforms>", _empty("DigestMethod", digest, canonical)


def _signed_info(
    shape: SignatureForm,
    method: SignatureAlgorithm,
    digest: DigestAlgorithm,
    references: Sequence[tuple[str, str]],
    *,
    xpath_filter: bool,
    canonical: bool,
) -> str:
    methods, transforms, digest_method = _parts(method, digest, xpath_filter, shape.soap_declared, canonical)
    out = [f"<ds:SignedInfo{shape.in_scope if canonical else ''}>", methods]
    for index, (uri, value) in enumerate(references):
        # The envelope's Reference first, with its Transforms; then one per payload part, without.
        out.append(
            f'<ds:Reference URI="{uri}">{transforms if index == 0 else ""}{digest_method}'
            f"<ds:DigestValue>{value}</ds:DigestValue></ds:Reference>"
        )
    out.append("</ds:SignedInfo>")
    return "".join(out)


def canonical_signed_info(
    shape: SignatureForm,
    method: SignatureAlgorithm,
    digest: DigestAlgorithm,
    references: Sequence[tuple[str, str]],
    *,
    xpath_filter: bool,
) -> bytes:
    """The C14N 1.0 form of the SignedInfo with ``references`` ((URI, DigestValue text), the envelope's
    first), what the SignatureValue signs."""
    text = _signed_info(shape, method, digest, references, xpath_filter=xpath_filter, canonical=True)
    return text.encode("utf-8")


def key_info(certificates: Sequence[str]) -> str:
    """The ``ds:KeyInfo`` carrying ``certificates`` (their DER in base64, the signer's first)."""
    data = "".join(f"<ds:X509Certificate>{certificate}</ds:X509Certificate>" for certificate in certificates)
    return f"<ds:KeyInfo><ds:X509Data>{data}</ds:X509Data></ds:KeyInfo>"


def signature(
    shape: SignatureForm,
    method: SignatureAlgorithm,
    digest: DigestAlgorithm,
    references: Sequence[tuple[str, str]],
    signature_value: str,
    key_info_text: str,
    *,
    xpath_filter: bool,
) -> bytes:
    """The signed ``ds:Signature`` as serialisation writes it in the document (UTF-8)."""
    declaration = f' xmlns:ds="{XMLDSIG}"' if shape.ds_declared else ""
    signed_info = _signed_info(shape, method, digest, references, xpath_filter=xpath_filter, canonical=False)
    return (
        f"<ds:Signature{declaration}>{signed_info}<ds:SignatureValue>{signature_value}</ds:SignatureValue>"
        f"{key_info_text}</ds:Signature>"
    ).encode()
