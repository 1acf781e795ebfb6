"""The project's convention for the JSON it prints: camelCase keys (``msh status --json``, the REST API's
aliases, the inbox's ``message.json``). :func:`keys_off_convention` walks every key of a JSON value."""

from __future__ import annotations

import inspect
import re
from functools import cache
from typing import Any

# lowerCamelCase: a lower-case word, then words that start with a capital (digits anywhere after the first).
CAMEL_CASE = re.compile(r"[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)*")

# ebMS terms the REST API does not use, spelt as the project spells them in JSON.
_TERMS = ("errorCode", "faultCode", "faultString", "highestSeverity", "sequenceNumber")


@cache
def known_spellings() -> dict[str, str]:
    """Lower-case -> camelCase of the terms the REST API's models spell (their aliases) and a few ebMS terms:
    a key that is one of them in other letter cases (``cpaid``, ``messageid``) breaks the convention too."""
    from pydantic import BaseModel

    import msh.api.models as models

    spellings = {term.lower(): term for term in _TERMS}
    for _, cls in inspect.getmembers(models, inspect.isclass):
        if issubclass(cls, BaseModel) and cls.__module__ == models.__name__:
            for name, field in cls.model_fields.items():
                key = field.alias or name
                spellings[key.lower()] = key
    return spellings


def keys_off_convention(value: Any, where: str = "$") -> list[str]:
    """The path of every key in ``value`` (parsed JSON) that is not camelCase, or that spells a known term
    in other letter cases."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}"
            known = known_spellings().get(key.lower())
            if not CAMEL_CASE.fullmatch(key) or (known is not None and key != known):
                found.append(path)
            found += keys_off_convention(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += keys_off_convention(item, f"{where}[{i}]")
    return found


def count_keys(value: Any) -> int:
    """How many keys ``value`` holds at any depth (to show a walk saw something)."""
    if isinstance(value, dict):
        return len(value) + sum(count_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_keys(v) for v in value)
    return 0
