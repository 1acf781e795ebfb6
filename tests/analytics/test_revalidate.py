"""msh revalidate: stored messages (a store and a folder of files) checked again on Spark; one row per
violation, the same rows as checking each message in turn without Spark."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pytest

from msh.analytics.revalidate import COLUMNS, Item, _check_item, _registry, list_items, revalidate
from msh.ebms.message import split_http_message
from msh.errors import ConfigurationError
from msh.store import Store
from tests.support.store import T0

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "messages"
CPA = str(ROOT / "samples" / "cpas" / "demo-a-b.xml")
OTHER_CPA = str(ROOT / "samples" / "cpas" / "demo-routed-a-c.xml")


@pytest.fixture
def archives(tmp_path: Path, open_store: Callable[..., Store]) -> list[str]:
    folder = tmp_path / "files"
    folder.mkdir()
    for name in ("order-request.http", "hostile-xxe.xml", "status-request.mime"):
        shutil.copy(SAMPLES / name, folder / name)
    store_path = tmp_path / "store.db"
    store = open_store(str(store_path))
    split = split_http_message((SAMPLES / "order-request.http").read_bytes())
    assert split is not None
    headers, body = split
    with store.transaction() as tx:
        blob = tx.put_blob(body)
        tx.insert_inbound(
            message_id="order-0001@a.example",
            from_party="A",
            cpaid="x",
            conversation_id="c",
            service="s",
            action="a",
            received_at=T0,
            content_type=headers["content-type"],
            body_blob_id=blob,
            ack_envelope=None,
            deliver=True,
        )
    store.close()
    return [str(folder), str(store_path)]


def _sequential(archives: list[str], cpas: list[str]) -> list[tuple[Any, ...]]:
    registry = _registry(cpas)
    stores: dict[str, Any] = {}
    rows = [row for item in list_items(archives) for row in _check_item(item, registry, stores)]
    for store in stores.values():
        store.close()
    return rows


def test_revalidation_on_spark_finds_the_violations(spark: Any, archives: list[str], tmp_path: Path) -> None:
    result = revalidate(spark, archives, [CPA], tmp_path / "out")
    assert result.messages == 4  # three files and one stored message
    parquet = ds.dataset(str(result.parquet), format="parquet").to_table().to_pylist()
    csv = pacsv.read_csv(next(result.csv.glob("*.csv")), convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    assert result.violations == len(parquet) == csv.num_rows
    assert csv.column_names == list(COLUMNS)
    got = sorted(tuple(r[c] for c in COLUMNS) for r in parquet)
    assert got == sorted(_sequential(archives, [CPA]))
    checks = {(Path(r["item"]).name, r["check"], r["error_code"]) for r in parquet}
    assert ("hostile-xxe.xml", "schema", "OtherXml") in checks  # refused when parsed
    assert ("order-request.http", "signature", "SecurityFailure") in checks  # the agreement asks for a signature
    assert any(r["item"] == "inbound:1" and r["direction"] == "inbound" for r in parquet)


def test_an_agreement_that_does_not_govern_the_messages_is_reported(archives: list[str]) -> None:
    rows = _sequential(archives[:1], [OTHER_CPA])
    assert any(r[4] == "agreement" and r[6] == "Error" for r in rows)


def test_bad_archives_and_agreements_are_refused(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no such file or folder"):
        list_items([str(tmp_path / "nothing")])
    with pytest.raises(ConfigurationError, match="no such agreement file"):
        revalidate(spark, [str(SAMPLES)], [str(tmp_path / "none.xml")], tmp_path / "out")
    assert Item("a", "b").key == "b"
