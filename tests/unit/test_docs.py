"""The documentation: README.md and docs/ as a newcomer meets them.

- the site builds with ``mkdocs build --strict`` (every page in the nav, every link and
  anchor resolved by MkDocs itself); skipped without mkdocs installed, except where
  ``PHALANX_REQUIRE_DOCS=1`` (CI) makes that a failure;
- every link of README.md and docs/**/*.md that is not a web address resolves, to a file
  of the repository and, with ``#anchor``, to a heading of that page; none leaves the
  repository;
- every command block a page marks runnable (an HTML comment ``<!-- runnable ... -->`` on
  the line before its fence) runs and exits 0, from a scratch directory holding ``.venv``
  (the blocks call ``.venv/bin/phalanx`` and ``.venv/bin/python`` as a checkout does).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
RUNNABLE = re.compile(
    r"^<!-- runnable[^>]*-->\n```(?:bash|sh)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE
)


def _prose(text: str) -> str:
    """The page less its code: links in code blocks and spans are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs (Python-Markdown's toc) gives the page's headings."""
    ids = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE):
        text = re.sub(r"[`*]", "", heading).strip().lower()
        text = re.sub(r"[^\w\s-]", "", text)
        ids.add(re.sub(r"[-\s]+", "-", text).strip("-"))
    return ids


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def test_the_pages_are_found() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "docs/index.md", "docs/reference.md", "docs/reference/cli.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            assert target.startswith(("https://", "http://")), target
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(ROOT), f"{target}: outside the repository"
        assert resolved.exists(), f"{target}: no such file"
        if anchor:
            assert resolved.suffix == ".md", target
            assert anchor in _anchors(resolved), f"{target}: no such heading"


#: Pages generated from the code, which say what its help says: the CLI's ``--traces-dir``
#: default is ``../shared/traces`` (a default path, not a link out).
GENERATED = {ROOT / "docs" / "reference" / "cli.md"}


def test_nothing_points_outside_the_repository() -> None:
    for page in set(PAGES) - GENERATED:
        text = page.read_text()
        assert "../shared" not in text, page
        assert "DESIGN.md" not in text, page


#: The committed pages a module writes (``python -m MODULE > PAGE``), by page.
GENERATED_BY = {
    "docs/reference.md": "phalanx.spec.reference",
    "docs/reference/cli.md": "phalanx.cli.reference",
    "docs/reference/rest-api.md": "phalanx.control.reference",
}


@pytest.mark.parametrize(("page", "module"), sorted(GENERATED_BY.items()))
def test_the_committed_generated_pages_are_what_their_modules_write(page: str, module: str) -> None:
    committed = (ROOT / page).read_text()
    assert committed == importlib.import_module(module).render(), (
        f"run: .venv/bin/python -m {module} > {page}"
    )


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n[here](#a-page) [there](missing.md) `[not](a-link.md)`\n")
    assert _links(page) == ["#a-page", "missing.md"]
    assert _anchors(page) == {"a-page"}


def _runnable() -> list[tuple[str, str]]:
    blocks = []
    for page in PAGES:
        for number, block in enumerate(RUNNABLE.findall(page.read_text()), start=1):
            blocks.append((f"{page.relative_to(ROOT).as_posix()}#{number}", block))
    return blocks


RUNNABLE_BLOCKS = _runnable()


def test_some_blocks_are_marked_runnable() -> None:
    assert len(RUNNABLE_BLOCKS) >= 2


@pytest.mark.slow
@pytest.mark.parametrize(("where", "block"), RUNNABLE_BLOCKS, ids=[w for w, _ in RUNNABLE_BLOCKS])
def test_every_runnable_block_runs(where: str, block: str, tmp_path: Path) -> None:
    venv = Path(sys.executable).parent.parent
    assert (venv / "bin" / "phalanx").exists(), f"{venv}: no phalanx script beside this Python"
    (tmp_path / ".venv").symlink_to(venv)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"{where}:\n{block}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("PHALANX_REQUIRE_DOCS") == "1":
            pytest.fail("mkdocs and mkdocs-material are not installed (make install installs them)")
        pytest.skip("mkdocs and mkdocs-material are not installed: make install installs them")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
