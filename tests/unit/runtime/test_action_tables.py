"""The runtime carries out the engine's actions by tables (msh.runtime.sending_actions, inbound_actions): each
action the engine can decide has exactly one handler, named after it, and an unknown action is refused."""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime

import pytest

from msh.engine.inbound import InboundAction
from msh.engine.sending import Action
from msh.runtime import inbound_actions, sending_actions


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.mark.parametrize(
    ("union", "table"),
    [(Action, sending_actions.HANDLERS), (InboundAction, inbound_actions.HANDLERS)],
    ids=["sending", "inbound"],
)
def test_every_action_of_the_engine_has_one_handler_named_after_it(union: object, table: dict[type, object]) -> None:
    actions = set(typing.get_args(union))
    assert actions == set(table), f"without a handler: {actions - set(table)}; not an action: {set(table) - actions}"
    for action, handler in table.items():
        assert getattr(handler, "__name__", "") == _snake(action.__name__), (action, handler)


def test_an_action_the_table_does_not_know_is_refused() -> None:
    class Unknown:
        pass

    run = sending_actions.SendingRun(None, None, "m@x", datetime(2026, 1, 1, tzinfo=UTC), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no handler for the sending action Unknown"):
        sending_actions.apply(run, [Unknown()])
