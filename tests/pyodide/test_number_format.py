"""calc_format.js (the report panel's and the request text's numbers) formats as sizing.view.fmt_num does."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sizing.view import fmt_num

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
CASES = [(v, d) for v in (0, 0.004, 1, -1, 999.5, 1000, 1234.5678, -98765.4321, 12345678.9) for d in (0, 1, 2, 4)]


def test_js_and_python_format_numbers_alike() -> None:
    if NODE is None:
        print("SKIP: node missing")
        pytest.skip("node missing")
    module = (ROOT / "docs" / "assets" / "calculator" / "calc_format.js").as_uri()
    script = (f"import {{ makeFormat }} from {json.dumps(module)};\n"
              f"const cases = {json.dumps(CASES)};\n"
              "const out = {};\n"
              "for (const lang of ['ru', 'uz', 'en']) out[lang] = cases.map(([v, d]) => makeFormat(lang).num(v, d));\n"
              "process.stdout.write(JSON.stringify(out));\n")
    proc = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    js = json.loads(proc.stdout)
    for lang in ("ru", "uz", "en"):
        assert js[lang] == [fmt_num(v, lang, d) for v, d in CASES], lang
