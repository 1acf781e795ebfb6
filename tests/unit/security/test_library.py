"""lxml and xmlsec run on the same libxml2 (docs/design.md §7), and libxmlsec opens nothing but the message's parts."""

from __future__ import annotations

import xmlsec
from lxml import etree

from msh.security import library_versions, sign, verify
from msh.security.library import LibraryVersions, bare_content_id, resolving_parts
from msh.security.profile import ds
from tests.support.security import PAYLOADS, RSA_SHA256, SHA256, certificate, envelope, rsa_key


def test_lxml_and_xmlsec_load_the_same_libxml2() -> None:
    versions = library_versions()
    assert versions.lxml_runtime == tuple(etree.LIBXML_VERSION)
    assert versions.xmlsec_runtime == tuple(xmlsec.get_libxml_version())
    assert versions.compatible, f"lxml and xmlsec disagree on libxml2: {versions}"
    assert str(versions).startswith("lxml: libxml2 ")


def test_a_disagreement_is_reported_as_incompatible() -> None:
    agreeing = LibraryVersions((2, 14, 6), (2, 14, 6), (2, 14, 6), (2, 14, 6), (1, 3, 9))
    assert agreeing.compatible
    assert not LibraryVersions((2, 13, 8), (2, 13, 8), (2, 14, 6), (2, 14, 6), (1, 3, 9)).compatible
    assert not LibraryVersions((2, 14, 6), (2, 9, 14), (2, 14, 6), (2, 9, 14), (1, 3, 9)).compatible


def test_trees_made_by_lxml_are_signed_and_verified_by_xmlsec() -> None:
    # The round trip hands lxml's libxml2 documents to libxmlsec: it only works on one libxml2.
    cert = certificate("library check")
    signed = sign(envelope(), PAYLOADS, rsa_key("library check"), cert, RSA_SHA256, SHA256)
    assert verify(signed, PAYLOADS, cert).signer == cert


def test_cid_urls_are_unescaped_and_brackets_dropped() -> None:
    assert bare_content_id("cid:a%40b") == "a@b"
    assert bare_content_id("<a@b>") == "a@b"
    assert bare_content_id(" CID:x ") == "x"


def test_libxmlsec_cannot_open_files_or_urls() -> None:
    root = etree.fromstring(envelope(payloads=()))
    header = root[0]
    signature = xmlsec.template.create(root, xmlsec.constants.TransformInclC14N, xmlsec.constants.TransformHmacSha256)
    header.append(signature)
    xmlsec.template.add_reference(signature, xmlsec.constants.TransformSha256, uri="file:///etc/hostname")
    context = xmlsec.SignatureContext()
    context.key = xmlsec.Key.from_binary_data(xmlsec.constants.KeyDataHmac, b"k" * 32)
    with resolving_parts({}):
        try:
            context.sign(signature)
        except xmlsec.Error:
            pass
        else:
            raise AssertionError("libxmlsec read a file")
    assert root.find(f".//{ds('DigestValue')}").text in (None, "")


def test_threads_resolve_their_own_parts() -> None:
    # The cid: callbacks are process-wide; each thread sees the parts of its own message only.
    from concurrent.futures import ThreadPoolExecutor

    cert = certificate("library check")
    messages = []
    for n in range(4):
        parts = {f"p{n}@x": f"payload {n}".encode() * 1000}
        messages.append(
            (sign(envelope(payloads=(f"p{n}@x",)), parts, rsa_key("library check"), cert, RSA_SHA256, SHA256), parts)
        )

    def check(index: int) -> bool:
        soap, parts = messages[index % 4]
        return verify(soap, parts, cert).references[1].uri == f"cid:p{index % 4}@x"

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(check, range(40)))
