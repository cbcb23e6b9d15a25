"""scripts/static_server.py: what it sends a browser (encoding, caching headers, 304), against a real socket."""

from __future__ import annotations

import gzip
import http.client
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import static_server

PAGE = b"<!doctype html><title>x</title>" + b"<p>words</p>" * 500
WASM = b"\0asm" + bytes(range(256)) * 200


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    root = tmp_path_factory.mktemp("site")
    (root / "en").mkdir()
    (root / "en" / "index.html").write_bytes(PAGE)
    (root / "a.wasm").write_bytes(WASM)
    (root / "a.wasm.br").write_bytes(b"brotli bytes")  # the server sends a sibling as it is: not decoded here
    (root / "a.wasm.gz").write_bytes(gzip.compress(WASM))
    (root / "main.57a0d79d.min.css").write_bytes(b"body{}" * 100)
    (root / "p.png").write_bytes(b"\x89PNG" + bytes(300))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(static_server.Handler, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def get(port: int, path: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def test_the_brotli_sibling_is_sent_for_the_plain_name(server: int) -> None:
    status, head, body = get(server, "/a.wasm", **{"Accept-Encoding": "gzip, deflate, br, zstd"})
    assert (status, head["content-encoding"], body) == (200, "br", b"brotli bytes")
    assert head["content-type"] == "application/wasm" and head["vary"] == "Accept-Encoding"
    assert head["content-length"] == str(len(b"brotli bytes"))


def test_gzip_sibling_without_br_and_the_plain_file_without_either(server: int) -> None:
    _, head, body = get(server, "/a.wasm", **{"Accept-Encoding": "gzip"})
    assert head["content-encoding"] == "gzip" and gzip.decompress(body) == WASM
    _, head, body = get(server, "/a.wasm", **{"Accept-Encoding": "br;q=0, gzip;q=0"})
    assert "content-encoding" not in head and body == WASM
    _, head, body = get(server, "/a.wasm")
    assert "content-encoding" not in head and body == WASM


def test_html_is_gzipped_on_the_fly_and_a_folder_serves_its_index(server: int) -> None:
    status, head, body = get(server, "/en/", **{"Accept-Encoding": "gzip, br"})
    assert status == 200 and head["content-encoding"] == "gzip" and gzip.decompress(body) == PAGE
    assert head["content-type"].startswith("text/html") and head["cache-control"] == "no-cache"
    status, head, _ = get(server, "/en")
    assert status == 301 and head["location"].endswith("/en/")


def test_an_image_is_not_recompressed(server: int) -> None:
    _, head, body = get(server, "/p.png", **{"Accept-Encoding": "gzip, br"})
    assert "content-encoding" not in head and body.startswith(b"\x89PNG")


def test_hashed_names_are_immutable_and_others_revalidate_with_304(server: int) -> None:
    _, head, _ = get(server, "/main.57a0d79d.min.css", **{"Accept-Encoding": "gzip"})
    assert head["cache-control"] == "public, max-age=31536000, immutable"
    _, head, _ = get(server, "/a.wasm", **{"Accept-Encoding": "br"})
    assert head["cache-control"] == "no-cache" and head["etag"]
    status, again, body = get(server, "/a.wasm", **{"Accept-Encoding": "br", "If-None-Match": head["etag"]})
    assert (status, body, again["etag"]) == (304, b"", head["etag"])
    _, other, _ = get(server, "/a.wasm", **{"Accept-Encoding": "gzip"})
    assert other["etag"] != head["etag"]  # another encoding, another entity


def test_head_sends_the_headers_of_get(server: int) -> None:
    _, got, _ = get(server, "/a.wasm", **{"Accept-Encoding": "br"})
    status, head, body = get(server, "/a.wasm", "HEAD", **{"Accept-Encoding": "br"})
    assert status == 200 and body == b""
    assert {k: head[k] for k in ("content-encoding", "content-length", "etag", "content-type")} == {
        k: got[k] for k in ("content-encoding", "content-length", "etag", "content-type")}


def test_missing_files_are_404(server: int) -> None:
    assert get(server, "/nope.js", **{"Accept-Encoding": "gzip"})[0] == 404


def test_accept_encoding_parsing() -> None:
    assert static_server.accepted("gzip, deflate, br, zstd") == {"gzip", "deflate", "br", "zstd"}
    assert static_server.accepted("br;q=0, gzip;q=0.5") == {"gzip"}
    assert static_server.accepted(None) == set()


def test_serve_sh_runs_this_server() -> None:
    text = (Path(__file__).resolve().parents[2] / "scripts" / "serve.sh").read_text("utf-8")
    assert "scripts/static_server.py" in text and "http.server" not in text


def test_a_visitor_who_leaves_mid_download_prints_no_traceback(tmp_path: Path) -> None:
    # serve.sh's console: a reset connection (a tab closed while the heap downloads) is not an error to print.
    (tmp_path / "big.bin").write_bytes(bytes(range(256)) * 200_000)  # 51 MB: still sending when the client resets
    # --port 0: the server binds a port the system picks and says which (a port picked here and freed could be
    # taken by another test's listener before the server binds it)
    proc = subprocess.Popen([sys.executable, str(Path(static_server.__file__)), str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(re.search(r":(\d+)/ ", proc.stdout.readline().decode()).group(1))  # listening once it prints
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(1000)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
            s.close()
        time.sleep(0.5)
        status, _, body = get(port, "/big.bin")  # and it still serves
        assert status == 200 and len(body) == 51_200_000
    finally:
        proc.terminate()
        err = proc.communicate(timeout=10)[1].decode()
    assert "Traceback" not in err, err
