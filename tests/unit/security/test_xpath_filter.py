"""The XPath filter of the envelope Reference (ebMS2 §4.1.3): "The second Transform element has a child XPath
element that has a value of: not (ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:
nextMSH"] | ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"] )". The same
expression written otherwise (white space, quotes, the SOAP namespace's prefix, the union's order) is the
same filter; any other expression, or a prefix bound to another namespace, is another filter."""

from __future__ import annotations

import pytest
from lxml import etree

from msh.security.xpath_filter import is_profile_filter, tokens, xpath_problem

SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
NEXT_MSH = "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"
NEXT = "http://schemas.xmlsoap.org/soap/actor/next"


def expression(
    prefix: str = "SOAP", quote: str = '"', first: str = NEXT_MSH, second: str = NEXT, gap: str = " "
) -> str:
    return (
        f"not({gap}ancestor-or-self::node()[@{prefix}:actor={quote}{first}{quote}]{gap}|{gap}"
        f"ancestor-or-self::node()[@{prefix}:actor={quote}{second}{quote}]{gap})"
    )


SAME = {
    "as the spec writes it, with its line breaks": (
        ' not (ancestor-or-self::node()[@SOAP:actor=\n        "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"]\n'
        "              | ancestor-or-self::node()[@SOAP:actor=\n"
        '        "http://schemas.xmlsoap.org/soap/actor/next"] )\n',
        {"SOAP": SOAP},
    ),
    "no white space at all": (expression(gap=""), {"SOAP": SOAP}),
    "tabs and line breaks between tokens": (expression(gap="\n\t "), {"SOAP": SOAP}),
    "single quotes": (expression(quote="'"), {"SOAP": SOAP}),
    "prefix SOAP-ENV": (expression(prefix="SOAP-ENV"), {"SOAP-ENV": SOAP}),
    "prefix soapenv, other prefixes declared too": (expression(prefix="soapenv"), {"soapenv": SOAP, "x": "urn:x"}),
    "the union the other way round": (expression(first=NEXT, second=NEXT_MSH), {"SOAP": SOAP}),
}


@pytest.mark.parametrize(("text", "namespaces"), SAME.values(), ids=SAME.keys())
def test_the_profiles_filter_written_otherwise_is_the_same_filter(text: str, namespaces: dict[str, str]) -> None:
    assert is_profile_filter(text, namespaces)


OTHER = {
    "only the nextMSH alternative": ('not(ancestor-or-self::node()[@SOAP:actor="' + NEXT_MSH + '"])', {"SOAP": SOAP}),
    "a space inside the actor literal": (
        expression(first="urn:oasis:names:tc:ebxml-msg:actor: nextMSH"),
        {"SOAP": SOAP},
    ),
    "another actor": (expression(first="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"), {"SOAP": SOAP}),
    "the prefix bound to another namespace": (expression(), {"SOAP": "urn:example:not-soap"}),
    "the prefix not declared": (expression(), {}),
    "an unprefixed actor attribute": (expression().replace("@SOAP:actor", "@actor"), {"SOAP": SOAP}),
    "the Body left out as well": (
        expression().replace("not(", "not(ancestor-or-self::SOAP:Body | ", 1),
        {"SOAP": SOAP},
    ),
    "without not()": (expression()[4:-1], {"SOAP": SOAP}),
    "everything": ("true()", {}),
}


@pytest.mark.parametrize(("text", "namespaces"), OTHER.values(), ids=OTHER.keys())
def test_any_other_expression_is_another_filter(text: str, namespaces: dict[str, str]) -> None:
    assert not is_profile_filter(text, namespaces)


def _xpath(text: str, namespaces: dict[str, str]) -> etree._Element:
    element = etree.Element("{http://www.w3.org/2000/09/xmldsig#}XPath", nsmap=namespaces)  # type: ignore[arg-type]
    element.text = text
    return element


def test_the_reason_names_what_differs() -> None:
    assert xpath_problem(_xpath(expression(), {"SOAP": SOAP})) is None
    wrong_namespace = xpath_problem(_xpath(expression(), {"SOAP": "urn:example:not-soap"}))
    assert wrong_namespace is not None and "binds the prefix SOAP to urn:example:not-soap" in wrong_namespace
    undeclared = xpath_problem(_xpath(expression(prefix="S"), {}))
    assert undeclared is not None and "uses the prefix S without declaring it" in undeclared
    other = xpath_problem(_xpath("true()", {}))
    assert other is not None and "is not the ebMS2 §4.1.3 one" in other and "'true()'" in other


def test_tokens_keep_literals_whole_and_resolve_prefixes() -> None:
    found = tokens("a:b[@c:d = 'x  y'] | e", {"a": "urn:a", "c": "urn:c"})
    assert found == [
        ("name", "urn:a", "b"),
        ("op", "["),
        ("op", "@"),
        ("name", "urn:c", "d"),
        ("op", "="),
        ("literal", "x  y"),
        ("op", "]"),
        ("op", "|"),
        ("name", "", "e"),
    ]
    assert tokens("ancestor-or-self::node()", {}) == [
        ("name", "", "ancestor-or-self"),
        ("op", "::"),
        ("name", "", "node"),
        ("op", "("),
        ("op", ")"),
    ]
