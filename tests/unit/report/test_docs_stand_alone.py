"""The product's documents stand alone: a user who installs burnin from its repository has every page
the README and docs/ point at. Only the tests, CI and the developers' bench tools read the reference
set kept beside the checkout (``../shared``)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
READERS_OF_THE_REFERENCE_SET = ("tests", ".ci", "bench")
SKIP = {".git", ".venv", "__pycache__", "reports", ".mypy_cache", ".ruff_cache", "build", "dist"}


def _files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if not path.is_file() or SKIP & set(parts) or parts[0] in READERS_OF_THE_REFERENCE_SET:
            continue
        if any(part.endswith(".egg-info") for part in parts) or path.suffix in (".png", ".so", ".pyc"):
            continue
        found.append(path)
    return found


def test_no_file_but_the_tests_ci_and_bench_refer_to_the_shared_folder() -> None:
    files = _files()
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".py" for p in files)
    offenders = [str(p.relative_to(REPO)) for p in files
                 if "../shared" in p.read_text(encoding="utf-8", errors="replace")]
    assert offenders == []


def test_every_document_the_readme_and_docs_link_to_is_in_the_repository() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        targets = re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text)
        targets += re.findall(r"`((?:docs/)?[\w.-]+\.md)`", text)
        for target in targets:
            base = REPO if target.startswith("docs/") or page.parent == REPO else page.parent
            if not (base / target).is_file() and not (REPO / "docs" / target).is_file():
                missing.append(f"{page.relative_to(REPO)} -> {target}")
    assert "docs/design.md" in (REPO / "README.md").read_text(encoding="utf-8")
    assert missing == []
