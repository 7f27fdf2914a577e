"""report.html's interactive front (dse.results.interactive): plotly.js inline, every front design's data
present, and (where a Chromium is installed) the page drawn by a real headless browser with no network."""
from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

import dse
from dse.results.interactive import DATA_ID, MAX_DETAILS, detail_cap, detail_ids, spread


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = dse.load_study("tests/data/tiny.yaml").run(seed=5)
    out = dse.write_results(result, tmp_path_factory.mktemp("res") / "tiny")
    return result, out


class Scripts(HTMLParser):
    """Every <script>: its attributes and text; every <img> source."""

    def __init__(self):
        super().__init__()
        self.scripts, self.images, self._open = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._open = [dict(attrs), ""]
            self.scripts.append(self._open)
        elif tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None

    def handle_data(self, data):
        if self._open is not None:
            self._open[1] += data


def page_data(html_text: str) -> tuple[Scripts, dict]:
    parser = Scripts()
    parser.feed(html_text)
    block = [text for attrs, text in parser.scripts if attrs.get("id") == DATA_ID]
    assert len(block) == 1
    return parser, json.loads(block[0])


def test_report_html_holds_the_interactive_front(written):
    result, out = written
    parser, data = page_data((out / "report.html").read_text())
    assert not any("src" in attrs for attrs, _ in parser.scripts), "no script is fetched"
    assert sum("plotly.js v" in text[:200] for _, text in parser.scripts) == 1, "plotly.js inline, once"
    assert parser.images and all(src.startswith("data:image/png;base64,") for src in parser.images)
    front = next(g for g in data["groups"] if g["front"])
    assert front["ids"] == list(result.pareto["design_id"])           # a small front: every design drawn
    shown = {m["column"] for m in data["metrics"]}
    assert {"latency_s", "energy_j_per_token", "area_mm2", "cost_usd", "peak_power_w"} <= shown
    for column in shown:
        assert front["values"][column] == pytest.approx(result.pareto[column].astype(float).tolist(), nan_ok=True)
    knee = result.knee()["design_id"]
    assert knee == next(iter(data["details"]))                         # the balanced design first
    detail = data["details"][knee]
    chips = result.chiplets(knee)
    assert len(detail["chiplets"]) == detail["rows"] * detail["cols"] == len(chips)
    assert [c["busy_pct"] for c in detail["chiplets"]] == pytest.approx((100 * chips["busy_share"]).tolist())
    assert [c["kind"] for c in detail["chiplets"]] == list(chips["kind"])
    R, C = detail["rows"], detail["cols"]                             # the tiny study's meshes
    assert len(detail["links"]) == 2 * (R * (C - 1) + C * (R - 1)), "every directed link, with its utilisation"


def test_caps_keep_the_page_small():
    assert list(spread(5, 10)) == [0, 1, 2, 3, 4]
    picked = spread(10_000, 1000)
    assert len(picked) == 1000 and picked[0] == 0 and picked[-1] == 9999
    import pandas as pd
    pareto = pd.DataFrame({"design_id": [f"d{i:05d}" for i in range(500)]})
    ids = detail_ids(pareto, ["d00250", "d00007"])
    assert ids[:2] == ["d00250", "d00007"] and len(ids) == MAX_DETAILS == len(set(ids))
    assert detail_cap(12, 5) == MAX_DETAILS and detail_cap(15_000, 5) == 6 and detail_cap(10**6, 5) == 5


BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell")


def test_report_draws_in_a_headless_browser_without_network(written, tmp_path):
    """Chromium from the system packages (`apt-get install chromium-headless-shell`), network blocked: every
    host resolves to nothing and every request goes to a dead proxy; the page still draws its front (SVG
    points, one per design) and the selected design's floorplan."""
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium-headless-shell)")
    result, out = written
    pick = result.pareto["design_id"].iloc[-1]
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=http://127.0.0.1:9",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=20000", "--dump-dom",
               f"file://{(out / 'report.html').resolve()}#{pick}"]
    try:
        dom = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("the browser did not finish loading the page")
    assert 'data-dse-front="drawn"' in dom, "the page's script ran to its end"
    front = dom.split('id="dse-front"', 1)[1].split('id="dse-detail"', 1)[0]
    assert "main-svg" in front
    assert front.count('class="point') >= len(result.pareto)
    assert f'id="dse-selected">{pick}<' in dom
    floorplan = dom.split('id="dse-floorplan"', 1)[1]
    assert "main-svg" in floorplan.split('id="dse-breakdown"', 1)[0]


def test_report_costs_each_shown_design_once(tmp_path, monkeypatch):
    """The floorplans, design sections and page details share one breakdown per design
    (dse.results.breakdowns), and hand out the numbers dse.model.breakdown gives for that design."""
    from dse.model.breakdown import chiplet_table
    from dse.results import breakdowns

    result = dse.load_study("tests/data/tiny.yaml").run(seed=5)
    calls: list[int] = []

    def counted(design, prepared, latency_s, *traffic):
        calls.append(id(design))
        return chiplet_table(design, prepared, latency_s, *traffic)

    monkeypatch.setattr(breakdowns, "chiplet_table", counted)
    out = dse.write_results(result, tmp_path / "tiny")
    assert calls and len(calls) == len(set(calls)), "a design's breakdown was computed twice"
    _, data = page_data((out / "report.html").read_text())
    design_id, detail = next(iter(data["details"].items()))
    design = result.designs[design_id]
    latency = float(result.pareto.set_index("design_id").loc[design_id, "latency_s"])
    direct = chiplet_table(design, result.prepare(), latency)
    assert [c["busy_pct"] for c in detail["chiplets"]] == pytest.approx(list(100 * direct["busy_share"]))
    cache = breakdowns.Breakdowns(result.prepare())
    half = cache.chiplets(design, latency / 2)          # the kept table, its shares over another step
    assert list(half["busy_share"]) == pytest.approx(list(2 * direct["busy_share"]))
