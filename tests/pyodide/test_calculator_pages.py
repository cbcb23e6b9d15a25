"""scripts/sitebuild/calculator_pages.py without Node: the wheel, the runtime copy, the CSP, the form defaults."""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import zipfile
from pathlib import Path

from sitebuild import calculator_pages, calculator_slots

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_is_reproducible_pure_python_with_the_data() -> None:
    name, data = calculator_pages.build_wheel()
    assert name == f"sizing-{calculator_pages.package_version()}-py3-none-any.whl"
    assert data == calculator_pages.build_wheel()[1]
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "sizing/__init__.py" in names and "sizing/data/models.json" in names and "sizing/data/gpus.json" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "Tag: py3-none-any" in zipfile.ZipFile(io.BytesIO(data)).read(
        "sizing-0.1.0.dist-info/WHEEL").decode()


def test_missing_node_modules_is_a_note_not_a_failure(tmp_path: Path) -> None:
    notes: list[str] = []
    manifest = calculator_pages.install_runtime(tmp_path / "site", tmp_path / "no-node-modules", warn=notes.append)
    assert manifest["installed"] is False
    assert notes and "npm ci" in notes[0] and "not installed" in notes[0]
    written = json.loads((tmp_path / "site" / "assets" / "calculator" / "runtime.json").read_text("utf-8"))
    assert written == manifest


def test_runtime_files_and_wheel_are_copied(tmp_path: Path) -> None:
    node = tmp_path / "pyodide"
    node.mkdir()
    (node / "package.json").write_text('{"version": "314.0.7"}', "utf-8")
    for name in calculator_pages.RUNTIME_FILES:
        (node / name).write_bytes(name.encode())
    manifest = calculator_pages.install_runtime(tmp_path / "site", node, warn=lambda _: None)
    target = tmp_path / "site" / "assets" / "pyodide"
    assert manifest["installed"] and manifest["pyodide"] == "314.0.7"
    assert (target / manifest["wheel"]).is_file()
    assert all((target / name).read_bytes() == name.encode() for name in calculator_pages.RUNTIME_FILES)


def test_package_json_pins_pyodide_exactly() -> None:
    pkg = json.loads((ROOT / "package.json").read_text("utf-8"))
    lock = json.loads((ROOT / "package-lock.json").read_text("utf-8"))
    assert pkg["dependencies"]["pyodide"] == "314.0.7"
    assert lock["packages"]["node_modules/pyodide"]["version"] == "314.0.7"


def test_csp_hashes_inline_scripts_only() -> None:
    page = ("<html><head><script>var a=1</script><script type=\"application/ld+json\">{}</script>"
            "<script src=\"x.js\"></script></head><body></body></html>")
    out = html.unescape(calculator_pages.with_csp(page))
    digest = base64.b64encode(hashlib.sha256(b"var a=1").digest()).decode()
    assert f"'sha256-{digest}'" in out
    assert out.count("sha256-") == 1
    assert "'wasm-unsafe-eval'" in out and "Content-Security-Policy" in out.split("<script>")[0]


def test_default_config_is_valid_and_matches_the_example() -> None:
    config = calculator_pages.default_config()
    result = calculator_pages.bridge().compute(config)
    assert result["ok"], result
    example = json.loads(calculator_pages.EXAMPLE.read_text("utf-8"))
    assert all(config[k] == example[k] for k in config)


def test_slots_become_the_form_and_the_first_paint_results() -> None:
    page = ('<p>x</p><div data-calc-slot="results" data-lang="en"><table><tr><td>md</td></tr></table></div>'
            '<div data-calc-slot="form" data-lang="en"></div>')
    out = calculator_slots.fill_slots(page)
    assert "data-calc-slot" not in out and "<td>md</td>" not in out
    peak = calculator_pages.default_result()["estimate"]["peak"]["allocated_bytes"]
    assert f'data-testid="peak-allocated" data-bytes="{peak}"' in out
    assert 'name="r"' in out and 'type="module"' in out
    markdown = calculator_pages.results_markdown(calculator_pages.default_result(), "ru")
    assert "<" not in markdown and markdown.count("\n|") > 20


def test_the_documented_example_links_compute() -> None:
    # The calculator page shows an example query in each language; it must be one the page can compute.
    from urllib.parse import parse_qsl

    kinds = {name: kind for name, kind, _ in calculator_pages.FIELDS}
    for lang in ("ru", "uz", "en"):
        text = (ROOT / "docs" / "calculator" / f"index.{lang}.md").read_text("utf-8")
        query = re.search(r"`\?([^`]+)`", text)
        assert query, lang
        config = calculator_pages.default_config()
        for key, value in parse_qsl(query.group(1)):
            assert key in kinds, key
            config[key] = int(value) if kinds[key] == "int" else value
        result = calculator_pages.bridge().compute(config)
        assert result["ok"], (lang, result)
        assert "[[sizing:calculator_params]]" in text


def test_the_parameter_table_lists_every_field_with_its_default() -> None:
    table = calculator_slots.HANDLERS["calculator_params"]([], {}, "en")
    defaults = calculator_pages.default_config()
    for name, _, _ in calculator_pages.FIELDS:
        assert f"| `{name}` |" in table
    assert "| `r` | Rank | `16` |" in table and f"`{defaults['model']}`" in table
