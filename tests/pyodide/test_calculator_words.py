"""Every warning and error the page can receive from sizing has words in all three languages."""

from __future__ import annotations

import re
from pathlib import Path

from sitebuild.calculator_pages import FIELDS, GROUPS
from sitebuild.calculator_results import warning_text
from sitebuild.calculator_text import TEXT

ROOT = Path(__file__).resolve().parents[2]


# Codes only the command line raises (reading files, --set overrides): the page never sees them.
CLI_ONLY = {"bad_override", "config_unreadable", "report_unreadable"}


def source() -> str:
    return "\n".join(p.read_text("utf-8") for p in sorted((ROOT / "sizing").rglob("*.py")))


def test_every_error_code_is_translated() -> None:
    codes = set(re.findall(r'SizingError\(\s*"(\w+)"', source())) - CLI_ONLY
    assert len(codes) > 10
    for code in sorted(codes):
        assert set(TEXT.get(f"e_{code}", {})) == {"ru", "uz", "en"}, code


def test_every_warning_code_is_translated_with_its_parameters() -> None:
    warnings = (ROOT / "sizing" / "warnings.py").read_text("utf-8")
    codes = set(re.findall(r'_w\(\s*"(\w+)"', warnings))
    assert {"logits_dominate", "does_not_fit", "gpu_no_bf16"} <= codes
    for code in sorted(codes):
        words = TEXT.get(f"w_{code}", {})
        assert set(words) == {"ru", "uz", "en"}, code
        placeholders = {frozenset(re.findall(r"\{(\w+)\}", text)) for text in words.values()}
        assert len(placeholders) == 1, (code, placeholders)  # the same parameters in every language


def test_warning_text_fills_parameters_and_falls_back_to_the_message() -> None:
    w = {"code": "paged_optimizer", "message": "x", "params": {"bytes": 3 * 2**30}}
    assert "3,00 ГиБ" in warning_text(w, "ru") and "3.00 GiB" in warning_text(w, "en")
    assert warning_text({"code": "new_code", "message": "English text", "params": {}}, "uz") == "English text"


def test_every_form_field_and_group_has_a_label_in_three_languages() -> None:
    """T() falls back to the key itself: a field added to the contract without words showed 'f_peft_type' as its
    label on the page."""
    keys = [f"f_{name}" for name, _, _ in FIELDS] + [group for group, _ in GROUPS]
    assert len(keys) > 20
    for key in keys:
        assert set(TEXT.get(key, {})) == {"ru", "uz", "en"}, key
