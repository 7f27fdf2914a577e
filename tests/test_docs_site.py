"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: no broken link or
anchor, no page left out of the navigation (mkdocs.yml's ``validation`` settings turn each into a warning,
and strict mode into a failure), and nothing fetched from the network (``theme.font: false``)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    class Loader(yaml.SafeLoader):
        pass
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def _nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in _nav_pages(v)]
    return [p for item in nav for p in _nav_pages(item)]


def test_every_page_is_in_the_nav_and_the_build_is_offline():
    """Checked without mkdocs too: every Markdown file under docs/ is in the nav; no font is fetched."""
    config = _config()
    pages = set(_nav_pages(config["nav"]))
    files = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert files == pages, f"not in the nav: {sorted(files - pages)}; missing: {sorted(pages - files)}"
    assert config["theme"]["font"] is False and config["strict"] is True
    assert {"omitted_files", "not_found", "anchors", "absolute_links"} <= set(config["validation"])
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]
    assert not {"social", "privacy", "offline-fetch"} & set(plugins)


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("mkdocs_click")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                             "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                            env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").read_text().count('id="dse-run"') == 1
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert 'id="dse.load_study"' in api and 'id="dse.StudyResult"' in api and 'id="dse.model.phases.Phase"' in api
