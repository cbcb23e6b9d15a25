"""How the site build grows: time `mkdocs build --strict` of the site, then of a copy with ten times the pages.

Both builds run in a temporary copy of docs/ (scripts/ and overrides/ linked, not copied), each in a
fresh process, so neither profits from the other's caches. The large copy holds every page ten times:
the original plus nine duplicates under new names, all in the navigation.

    python scripts/bench_build.py            # prints pages and seconds for 1x and 10x
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mkdocs.utils.yaml import yaml_load

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = re.compile(r"^(?P<stem>.+)\.(?P<lang>ru|uz|en)\.md$")


def copy_name(path: str, n: int) -> str:
    """"guides/memory.md" -> "guides/memory-copy3.md"."""
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-copy{n}{dot}{ext}"


def expand_nav(nav: Any, times: int) -> Any:
    """The nav with every page followed by its `times - 1` copies."""
    if isinstance(nav, list):
        out: list[Any] = []
        for item in nav:
            out.append(expand_nav(item, times))
            path = item if isinstance(item, str) else next(iter(item.values())) if isinstance(item, dict) else None
            if isinstance(path, str):
                out += [copy_name(path, n) for n in range(2, times + 1)]
        return out
    if isinstance(nav, dict):
        return {key: expand_nav(value, times) for key, value in nav.items()}
    return nav


def prepare(project: Path, workdir: Path, times: int) -> int:
    """A site tree in `workdir` with every page `times` times; returns the number of page files."""
    shutil.copytree(project / "docs", workdir / "docs")
    for name in ("scripts", "overrides"):
        (workdir / name).symlink_to((project / name).resolve(), target_is_directory=True)
    with (project / "mkdocs.yml").open(encoding="utf-8") as fh:
        config = yaml_load(fh)
    pages = sorted((workdir / "docs").rglob("*.md"))
    for page in pages:
        match = SUFFIX.match(page.name)
        if not match:
            continue
        for n in range(2, times + 1):
            page.with_name(f"{match['stem']}-copy{n}.{match['lang']}.md").write_bytes(page.read_bytes())
    if times > 1:
        config["nav"] = expand_nav(config["nav"], times)
    # JSON is YAML: the resolved config (site_url from SITE_URL already filled in) with the larger nav.
    (workdir / "mkdocs.yml").write_text(json.dumps(config, ensure_ascii=False, indent=2), "utf-8")
    return len(list((workdir / "docs").rglob("*.md")))


def build(workdir: Path) -> float:
    """Seconds of one `mkdocs build --strict` in a fresh process."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q"], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"build failed in {workdir}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=10, help="how many times each page appears in the large copy")
    parser.add_argument("--project", type=Path, default=ROOT, help="folder with mkdocs.yml, docs/ (default: this repo)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp:
        for times in (1, args.times):
            workdir = Path(tmp) / f"x{times}"
            workdir.mkdir()
            files = prepare(args.project, workdir, times)
            seconds = build(workdir)
            results.append((times, files, seconds))
            print(f"{times:>3}x  {files:>5} page files (3 languages)  {seconds:7.2f} s  "
                  f"{seconds / files * 1000:6.1f} ms per page file", flush=True)
    (_, files1, s1), (_, files10, s10) = results
    print(f"growth: {files10 / files1:.1f}x the pages took {s10 / s1:.1f}x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
