"""The committed docs/gpus/*.md are exactly what scripts/sitebuild/gpu_pages.py writes now.

MkDocs and mkdocs-static-i18n read the pages from docs/ when they scan it (before any hook could write
them), so they stay committed; this test regenerates them in memory and fails on any difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from sitebuild import gpu_pages


def test_committed_gpu_pages_are_regenerated_unchanged() -> None:
    stale = [str(path.relative_to(gpu_pages.ROOT)) for path in gpu_pages.stale()]
    assert stale == [], f"stale GPU pages (run PYTHONPATH=scripts python -m sitebuild.gpu_pages): {stale}"


def test_every_generated_page_is_a_catalog_card_in_three_languages() -> None:
    written = gpu_pages.pages()
    assert len(written) == 3 * len(gpu_pages.PAGES)
    assert {path.parent.name for path in written} == {"gpus"}


def test_check_reports_a_changed_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docs" / "gpus").mkdir(parents=True)
    monkeypatch.setattr(gpu_pages, "ROOT", tmp_path)
    assert gpu_pages.main([]) == 0 and gpu_pages.main(["--check"]) == 0
    target = tmp_path / "docs" / "gpus" / "t4-16gb.en.md"
    target.write_text(target.read_text("utf-8") + "hand edit\n", "utf-8")
    assert gpu_pages.main(["--check"]) == 1
    assert "stale: docs/gpus/t4-16gb.en.md" in capsys.readouterr().out


def test_what_fits_comes_before_the_specification_sources() -> None:
    """Issue 15, item 10: a GPU page answers first (specifications, then what fits); the long list of sources
    of the specifications (repository paths, commits) stands at the end, not before the answer."""
    for path, text in gpu_pages.pages().items():
        heads = [line for line in text.splitlines() if line.startswith("## ")]
        assert len(heads) >= 3, path
        before_fits = text.split(heads[1], 1)[0]
        assert "github.com" not in before_fits and "](" not in before_fits.split(heads[0], 1)[1], path
        assert "github.com" in text.split(heads[-1], 1)[1], path  # the sources are the last section
