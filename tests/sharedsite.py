"""One strict build of the site per test run, at a sub-path of a local server, shared by tests/site and
tests/browser and by every pytest-xdist worker (the first to ask builds it; the others wait for that build).

The controller process (plain pytest, or xdist's controller) picks the folder and a free port and serves the
folder for the whole run; its workers inherit both through the environment. The build's SITE_URL is that
server plus a sub-path, so the site tests still see links that must not assume the site sits at "/", and the
browser tests load the very pages whose links stay on this origin (Material fetches sitemap.xml from them).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUB_PATH = "lora-gpu/"  # a sub-path, not "/": links that assume the site sits at "/" break here
ENV_DIR, ENV_URL = "SIZING_TEST_SITE_DIR", "SIZING_TEST_SITE_URL"
MIME = {".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript", ".json": "application/json",
        ".whl": "application/zip", ".zip": "application/zip", ".py": "text/plain", ".md": "text/markdown"}


class Handler(SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {**SimpleHTTPRequestHandler.extensions_map, **MIME}

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def handle(self) -> None:
        # The browser tests abort downloads (a page closed mid-load): a reset connection is not a failure to print.
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            super().handle()


def serve(directory: Path, handler: type[Handler]) -> ThreadingHTTPServer:
    """`directory` through `handler` on a free port of 127.0.0.1, in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def origin(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/"


_state: dict[str, Any] = {}


def start(config: pytest.Config) -> None:
    """In the controller: the shared folder and its server, named to the workers through the environment."""
    if hasattr(config, "workerinput") or os.environ.get(ENV_DIR):
        return  # an xdist worker (or a nested run): the controller's folder and server
    folder = Path(tempfile.mkdtemp(prefix="sizing-site-"))
    server = serve(folder, Handler)
    _state.update(folder=folder, server=server)
    os.environ[ENV_DIR], os.environ[ENV_URL] = str(folder), origin(server) + SUB_PATH


def stop(config: pytest.Config) -> None:
    """In the controller, at the end of the run: the server stops and the folder goes."""
    if "server" not in _state:
        return
    _state["server"].shutdown()
    _state["server"].server_close()
    shutil.rmtree(_state["folder"], ignore_errors=True)
    for name in (ENV_DIR, ENV_URL):
        os.environ.pop(name, None)
    _state.clear()


@contextmanager
def cache_lock() -> Iterator[None]:
    """Held while this checkout's build/pyodide-stdlib cache may be written (the site build, the Pyodide tests):
    xdist workers would otherwise write the same files at once (the cache's .part files are shared)."""
    cache = ROOT / "build"
    cache.mkdir(exist_ok=True)
    with (cache / ".tests.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Build:
    root: Path  # the built site (the folder its SITE_URL points at)
    url: str  # SITE_URL: the local server plus SUB_PATH
    log: str  # mkdocs' output


def build() -> Build:
    """`mkdocs build --strict` of the repository's site, once per run whichever process asks first; a failed
    build fails every test that needs it, with mkdocs' output."""
    folder, url = Path(os.environ[ENV_DIR]), os.environ[ENV_URL]
    out, done = folder / SUB_PATH.strip("/"), folder / "build.json"
    with (folder / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building: wait for its result
        if not done.is_file():
            env = {**os.environ, "SITE_URL": url, "NO_MKDOCS_2_WARNING": "1"}
            command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f", str(ROOT / "mkdocs.yml"),
                       "-d", str(out)]
            with cache_lock():
                proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                                      check=False)
            done.write_text(json.dumps({"returncode": proc.returncode, "log": proc.stdout + proc.stderr}), "utf-8")
    result = json.loads(done.read_text("utf-8"))
    if result["returncode"] != 0:
        pytest.fail(f"mkdocs build --strict failed (exit {result['returncode']}):\n{result['log'][-6000:]}")
    return Build(out, url, result["log"])
