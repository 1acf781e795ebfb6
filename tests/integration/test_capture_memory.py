"""``msh message inspect`` and ``msh message verify`` read a large capture as a stream: the peak resident
size of the process grows by far less than the file (the package reader spools the payload to a temporary
file, as the endpoint does for a request), for a plain and for a chunked capture.

Each measurement runs in a fresh Python process (``ru_maxrss`` before and after the command); nothing here
measures time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "messages"
MIB = 1 << 20
PAYLOAD = 96 * MIB
BOUNDARY = b"--MSH-demo-boundary-1"

_MEASURE = """
import json, resource, sys
from msh.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
status = main(sys.argv[1:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": status, "grown_kib": after - before}), file=sys.stderr)
"""


def _large_capture(path: Path, *, chunked: bool) -> None:
    """The sample order request with one more part of ``PAYLOAD`` bytes before its closing delimiter."""
    sample = (SAMPLES / "order-request.http").read_bytes()
    head, _, body = sample.partition(b"\r\n\r\n")
    close = body.rindex(BOUNDARY + b"--")
    part_head = BOUNDARY + b"\r\nContent-ID: <big@a.example>\r\nContent-Type: application/octet-stream\r\n\r\n"
    line = b"0123456789abcdef" * 4 + b"\r\n"  # 66 bytes
    lines = PAYLOAD // len(line)
    head = b"\r\n".join(h for h in head.split(b"\r\n") if not h.lower().startswith(b"content-length"))
    if chunked:
        head += b"\r\nTransfer-Encoding: chunked"
    with path.open("wb") as out:
        out.write(head + b"\r\n\r\n")

        def emit(data: bytes) -> None:
            out.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)

        emit(body[:close] + part_head)
        block = line * 16384  # about 1 MiB
        for _ in range(lines // 16384):
            emit(block)
        emit(b"\r\n" + body[close:])
        if chunked:
            out.write(b"0\r\n\r\n")


def _run(*args: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, timeout=600, check=False
    )
    return json.loads(done.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("chunked", [False, True], ids=["plain", "chunked"])
def test_a_large_capture_is_read_as_a_stream(tmp_path: Path, chunked: bool) -> None:
    capture = tmp_path / "large.http"
    _large_capture(capture, chunked=chunked)
    assert capture.stat().st_size > 90 * MIB
    inspected = _run("message", "inspect", "--json", str(capture))
    # Whole-file reading held the file at least twice over (its bytes, the body cut from them).
    assert inspected["grown_kib"] < 40 * 1024, inspected
    verified = _run("message", "verify", "--keyinfo", str(capture))
    assert verified["status"] == 1  # the sample is not signed: a verdict, after reading the file through
    assert verified["grown_kib"] < 40 * 1024, verified
