"""``msh serve --log-format json``: one JSON object per line, with the runtime's fields where a record carries them."""

from __future__ import annotations

import asyncio
import io
import json
import logging

from msh.cli.logformat import JsonFormatter
from msh.runtime.logfields import fields
from msh.testing.network import TestNetwork
from tests.unit.admin.conftest import B_URL, order, settings


def capture() -> tuple[logging.Handler, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    return handler, stream


def test_a_record_is_one_json_line_with_its_fields() -> None:
    handler, stream = capture()
    log = logging.getLogger("msh.test.json")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.INFO)
    try:
        log.warning("message %s refused", "m-1@x", extra=fields(message_id="m-1@x", cpa_id="cpa-1", event="rejected"))
        log.info("plain")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")
    finally:
        log.removeHandler(handler)
    first, second, third = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "message m-1@x refused"
    assert (first["level"], first["logger"]) == ("WARNING", "msh.test.json")
    assert (first["messageId"], first["cpaId"], first["event"]) == ("m-1@x", "cpa-1", "rejected")
    assert "partner" not in first and first["time"].endswith("+00:00")
    assert set(second) == {"time", "level", "logger", "message"}
    assert "ValueError: boom" in third["exception"]


def test_the_runtime_logs_a_failed_transmission_with_its_message_id() -> None:
    handler, stream = capture()
    runtime = logging.getLogger("msh.runtime")
    runtime.addHandler(handler)
    runtime.setLevel(logging.WARNING)

    async def main() -> str:
        net = TestNetwork(seed=2)
        a = net.add("a", settings("a"))
        net.add("b", settings("b"))
        await net.start()
        try:
            net.faults.down.add(B_URL)
            message_id = await a.submit_async(order(0))
            await net.settle()
            return message_id
        finally:
            await net.close()

    try:
        message_id = asyncio.run(main())
    finally:
        runtime.removeHandler(handler)
        runtime.setLevel(logging.NOTSET)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    failed = [line for line in lines if line.get("event") == "transmission"]
    assert failed and failed[0]["messageId"] == message_id
    assert failed[0]["message"].startswith(f"transmission 1 of {message_id} failed")
