"""The memory snapshot restored under Node with the page's lazy stdlib zip answers what CPython answers."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sitebuild import calculator_pages, heap_pack, pyodide_runtime, stdlib_trim
from sizing import web
from tests import sharedsite
from tests.needs import cannot_run
from tests.pyodide.test_pyodide_node import NODE, PYODIDE, configs, reports

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "docs" / "assets" / "calculator" / "worker.js"


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if NODE is None or not (PYODIDE / "pyodide.mjs").is_file():
        cannot_run("node or node_modules/pyodide missing (run `npm ci`)")  # under CI=true: a failure
    tmp = tmp_path_factory.mktemp("restore")
    version = calculator_pages.pyodide_version() or ""
    with sharedsite.cache_lock():  # the site build may be filling the same cache in another xdist worker
        full = pyodide_runtime.stdlib_pyc(version, pytest.fail)
        name, wheel = calculator_pages.build_wheel()
        defaults = calculator_pages.default_config()
        run = lambda *a: pyodide_runtime._run_node(*a, pytest.fail)  # noqa: E731
        trimmed = stdlib_trim.trimmed_stdlib(full, wheel, defaults, pyodide_runtime.STDLIB_CACHE, run) if full else None
        assert trimmed is not None
        snapshot = pyodide_runtime.memory_snapshot(version, trimmed, wheel, json.dumps(defaults), pytest.fail,
                                                   calculator_pages.page_words())  # the page's snapshot
        assert snapshot is not None
        imported = json.loads(pyodide_runtime.in_heap(snapshot).read_text("utf-8"))
        lazy = tmp / stdlib_trim.LAZY
        stdlib_trim.lazy_stdlib(trimmed, imported, lazy)
        (tmp / "heap.raw").write_bytes(heap_pack.unpack(gzip.decompress(snapshot.read_bytes())))
    (tmp / name).write_bytes(wheel)
    # the default configuration as a page asks for it: its own key order, its words re-serialised
    page_text = json.dumps(dict(reversed(list(defaults.items()))))
    paged = [[page_text, json.dumps(json.loads(w), ensure_ascii=False)] for w in calculator_pages.page_words()]
    (tmp / "inputs.json").write_text(json.dumps({"configs": configs(), "reports": reports(), "paged": paged}), "utf-8")
    found = re.search(r"const REREAD_ZIP = `(.*?)`;", WORKER.read_text("utf-8"), re.S)
    assert found, "worker.js has no REREAD_ZIP"
    (tmp / "reread.py").write_text(found.group(1), "utf-8")
    proc = subprocess.run([NODE, str(Path(__file__).parent / "restore_node.mjs"), str(tmp / "heap.raw"), str(lazy),
                           str(tmp / name), str(tmp / "inputs.json"), str(tmp / "reread.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.fail(f"node exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout), "imported": imported, "lazy": lazy, "trimmed": trimmed, "paged_in": paged}


def test_the_lazy_zip_leaves_out_what_the_heap_holds(restored: dict[str, Any]) -> None:
    lazy = set(zipfile.ZipFile(restored["lazy"]).namelist())
    trimmed = set(zipfile.ZipFile(restored["trimmed"]).namelist())
    imported = set(restored["imported"])
    assert {"json/__init__.pyc", "dataclasses.pyc", "zipfile/__init__.pyc"} <= imported
    assert lazy == trimmed - imported and "encodings/cp1251.pyc" in lazy
    assert restored["lazy"].stat().st_size < restored["trimmed"].stat().st_size / 3


def test_restored_answers_equal_cpython(restored: dict[str, Any]) -> None:
    texts = configs()
    assert [json.loads(a) for a in restored["answers"]] == [json.loads(web.compute_json(t)) for t in texts]
    assert [json.loads(a) for a in restored["reports"]] == [json.loads(web.report_json(t)) for t in reports()]


def test_a_module_the_heap_lacks_is_imported_from_the_lazy_zip(restored: dict[str, Any]) -> None:
    assert restored["codec"] == "cp1251"


def test_the_default_configuration_is_answered_from_the_heap_as_cpython_answers(restored: dict[str, Any]) -> None:
    assert restored["remembered"] == 6  # 3 languages x (estimate, estimate + fit table)
    for (text, words), (answer, ms) in zip(restored["paged_in"], restored["paged"], strict=True):
        assert json.loads(answer) == json.loads(web.compute_json(text, True, words))
        print(f"default configuration answered in {ms:.1f} ms after the restore")  # a figure, not a test
