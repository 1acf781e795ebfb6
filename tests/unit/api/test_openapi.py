"""The OpenAPI 3.1 document: served at {api.path}/openapi.json, the same as the committed copy
(schemas/msh-api.openapi.json), and describing every route."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.api.conftest import Apis, on_apis

COPY = Path(__file__).resolve().parents[3] / "schemas" / "msh-api.openapi.json"
REGENERATE = "python -m msh.api.openapi schemas/msh-api.openapi.json"


def test_the_served_document_is_the_committed_copy() -> None:
    async def scenario(t: Apis) -> None:
        r = await t.api_a.get("/api/openapi.json")
        assert r.status_code == 200
        served = r.json()
        assert served["openapi"].startswith("3.1.")
        committed = json.loads(COPY.read_text(encoding="utf-8"))
        assert served == committed, f"the API changed: regenerate the copy with {REGENERATE}"

    on_apis(scenario)


def test_the_document_describes_every_route_and_its_headers() -> None:
    doc = json.loads(COPY.read_text(encoding="utf-8"))
    paths = doc["paths"]
    assert set(paths) == {
        "/api/ping",
        "/api/messages/{message_id}/remote-status",
        "/api/messages",
        "/api/messages/{message_id}",
        "/api/inbox",
        "/api/inbox/overdue",
        "/api/inbox/{entry_id}",
        "/api/inbox/{entry_id}/release",
        "/api/inbox/{entry_id}/reject",
        "/api/inbox/batches",
        "/api/inbox/batches/{batch_id}",
        "/api/inbox/batches/{batch_id}/confirm",
    }
    post = paths["/api/messages"]["post"]
    assert {p["name"] for p in post["parameters"]} >= {"Message-ID", "MsgCreate"}
    assert set(post["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
    assert "SubmitRequest" in doc["components"]["schemas"]
    assert "options" in paths["/api/messages"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    # ebMS2 §8, §7: the MSH services, their answers and their problems documented.
    assert paths["/api/ping"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PingRequest"
    }
    assert {"PingOutcome", "RemoteStatusDocument"} <= set(doc["components"]["schemas"])
    remote = paths["/api/messages/{message_id}/remote-status"]["get"]
    assert {p["name"] for p in remote["parameters"]} == {"message_id", "timeout"}
    assert {"200", "404", "422"} <= set(remote["responses"])
