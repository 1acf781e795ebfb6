"""Whether the XPath filter of a received envelope Reference is the one of the ebMS 2.0 profile (ebMS2 §4.1.3).

The profile's filter is ``not(ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"]
| ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"])``: it leaves out the
elements targeted at the next MSH or the next SOAP node, and nothing else. Implementations write it in
several ways that mean the same expression, and each is accepted:

* any white space between the XPath 1.0 tokens (the spec's own example breaks lines inside it);
* either quote for the string literals (``"``, ``'``, or ``&quot;`` in the XML, which is ``"`` once parsed);
* any prefix for the SOAP envelope namespace, declared on the ``ds:XPath`` element or an ancestor
  (``SOAP``, ``SOAP-ENV``, ``soap``...): XPath names attributes by namespace, not by prefix;
* the two alternatives of the union in either order (a union is the same node-set either way).

The comparison is of XPath 1.0 tokens (XPath 1.0 §3.7), with each prefixed name replaced by its namespace
URI, so white space inside a literal still counts (``"urn:...: nextMSH"`` names another actor) and a prefix
bound to another namespace names another attribute: such a filter is refused by :func:`xpath_problem`,
which says what differs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Final

from lxml import etree

from msh.ebms.namespaces import SOAP_ENV
from msh.security.algorithms import EBMS_XPATH

__all__ = ["is_profile_filter", "tokens", "xpath_problem"]

Token = tuple[str, ...]
"""One XPath token: ("literal", value), ("name", namespace URI or "", local name) or ("op", text)."""

# XPath 1.0 §3.7 ExprToken: literals, numbers, the multi-character operators, names (a QName, an NCName or
# a name test ending in ':*'), single-character punctuation and operators.
_TOKEN: Final = re.compile(
    r"""\s*(?:
        (?P<literal>"[^"]*"|'[^']*')
      | (?P<number>\d+(?:\.\d*)?|\.\d+)
      | (?P<op>::|//|\.\.|!=|<=|>=)
      | (?P<name>[^\W\d][\w.\-]*(?::(?:[^\W\d][\w.\-]*|\*))?)
      | (?P<punct>[()\[\]@,|=/<>+*.$-])
      | (?P<other>\S)
    )""",
    re.VERBOSE,
)


class _Unbound(ValueError):
    """A prefix the XPath element does not declare."""


def tokens(text: str, namespaces: Mapping[str | None, str]) -> list[Token]:
    """The XPath 1.0 tokens of ``text``, prefixed names resolved with ``namespaces`` (prefix -> URI).
    Raises ValueError naming a prefix that ``namespaces`` does not declare."""
    out: list[Token] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:  # only white space is left
            break
        position = match.end()
        kind = match.lastgroup or "other"
        value = match.group(kind)
        if kind == "literal":
            out.append(("literal", value[1:-1]))
        elif kind == "name" and ":" in value:
            prefix, local = value.split(":", 1)
            uri = namespaces.get(prefix)
            if uri is None:
                raise _Unbound(prefix)
            out.append(("name", uri, local))
        elif kind == "name":
            out.append(("name", "", value))
        else:
            out.append(("op", value))
    return out


def _swapped(expression: str) -> str:
    """The profile's filter with the two alternatives of its union the other way round."""
    inner = expression.strip()[len("not(") : -1]
    first, second = (part.strip() for part in inner.split("|"))
    return f"not({second} | {first})"


_PROFILE: Final = tuple(
    tuple(tokens(expression, {"SOAP": SOAP_ENV})) for expression in (EBMS_XPATH, _swapped(EBMS_XPATH))
)


def is_profile_filter(text: str, namespaces: Mapping[str | None, str]) -> bool:
    """Whether the XPath expression ``text`` (its prefixes declared by ``namespaces``) is the profile's filter."""
    try:
        return tuple(tokens(text, namespaces)) in _PROFILE
    except ValueError:
        return False


def xpath_problem(element: etree._Element) -> str | None:
    """Why the ``ds:XPath`` ``element`` is not the ebMS2 §4.1.3 filter (None when it is)."""
    return _problem(element.text or "", frozenset(element.nsmap.items()))


@functools.lru_cache(maxsize=64)
def _problem(text: str, in_scope: frozenset[tuple[str | None, str]]) -> str | None:
    """:func:`xpath_problem` of an expression and the namespaces in scope: the same few come in every
    message (each partner writes its filter one way), so each is tokenised once."""
    namespaces = dict(in_scope)
    if is_profile_filter(text, namespaces):
        return None
    shown = " ".join(text.split())
    why = "the profile's filter leaves out only the elements targeted at the next MSH or the next SOAP node"
    try:
        tokens(text, namespaces)
    except _Unbound as exc:
        return f"its XPath filter ({shown!r}) uses the prefix {exc} without declaring it; {why}"
    actor_prefixes = {
        prefix
        for prefix in re.findall(r"@([^\W\d][\w.\-]*):actor\b", text)
        if namespaces.get(prefix) not in (None, SOAP_ENV)
    }
    if actor_prefixes:
        bound = ", ".join(f"{p} to {namespaces.get(p)}" for p in sorted(actor_prefixes))
        return (
            f"its XPath filter ({shown!r}) binds the prefix {bound}, not to the SOAP envelope namespace "
            f"{SOAP_ENV}, so it filters on another attribute; {why}"
        )
    return f"its XPath filter ({shown!r}) is not the ebMS2 §4.1.3 one: {why}"
