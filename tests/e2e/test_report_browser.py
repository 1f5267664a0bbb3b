"""report.html in a real headless browser (Debian's chromium): scripts, escaping, sorting, filtering.

A simulated run is gathered and judged for real; then a node's reason and
GPU name are made to carry ``<script>`` and an ANSI escape, as a hostile or
broken node could print them, and ``burnin report`` renders the run again.
Chromium's ``--dump-dom`` serialises the DOM after the page's scripts ran.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HOSTILE = "<script>window.__pwned=1</script>\x1b[31m"
SHOWN = "&lt;script&gt;window.__pwned=1&lt;/script&gt;\\x1b[31m"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not found: CI installs Debian's chromium (.ci/run)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return found


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-browser") / "run"
    run = burnin("run", "--sim", "4", "--fault", "sim03:nvlink-down", "--out", str(out))
    assert run.returncode == 1, run.stderr
    gate = json.loads((out / "gate.json").read_text())
    gate["nodes"]["sim03"]["reasons"].append(f"GPU-10 the node printed {HOSTILE}")
    (out / "gate.json").write_text(json.dumps(gate))
    facts_file = out / "facts" / "sim02.json"
    facts = json.loads(facts_file.read_text())
    facts["nvml"]["gpus"][0]["name"] = f"H100 {HOSTILE}"
    facts_file.write_text(json.dumps(facts))
    rendered = burnin("report", str(out))
    assert rendered.returncode == 0, rendered.stderr
    return out / "report.html"


def dump_dom(chromium: str, page: Path, profile: Path) -> tuple[str, str]:
    """(the DOM after the page's scripts ran, chromium's log with console messages)."""
    proc = subprocess.run(
        [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def console_errors(log: str) -> list[str]:
    """Uncaught script errors and Content-Security-Policy violations chromium logged from the page."""
    return [line for line in log.splitlines() if "CONSOLE" in line and any(
        word in line for word in ("Uncaught", "Content Security Policy", "Refused to"))]


def test_console_errors_are_seen(chromium: str, tmp_path: Path) -> None:
    """The log lines the report tests rely on: an uncaught error and a blocked inline script."""
    page = tmp_path / "bad.html"
    policy = "script-src 'sha256-" + "A" * 43 + "='"  # a well-formed hash of no script on the page
    page.write_text(f'<html><head><meta http-equiv="Content-Security-Policy" content="{policy}"></head>'
                    "<body><script>throw new Error('boom')</script></body></html>")
    _, log = dump_dom(chromium, page, tmp_path / "profile")
    assert any("Content Security Policy" in line and "blocked" in line for line in console_errors(log))
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, log = dump_dom(chromium, page, tmp_path / "profile")
    assert len(console_errors(log)) == 1 and "Uncaught Error: boom" in console_errors(log)[0]


def test_a_script_a_node_printed_is_shown_as_text_and_never_runs(chromium: str, hostile_run: Path,
                                                                  tmp_path: Path) -> None:
    dom, log = dump_dom(chromium, hostile_run, tmp_path / "profile")
    assert 'data-report-ready="1"' in dom, "the page's own script ran under its Content-Security-Policy"
    assert dom.count("<script") == 1, "no element was created from a node's text"
    assert "<script>window.__pwned" not in dom
    assert dom.count(SHOWN) >= 2, "the reason and the GPU name show the script as text, the escape as \\x1b"
    assert "\x1b" not in dom
    assert console_errors(log) == [], "no script error and no CSP violation: nothing tried to run"


PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
</script>"""

ACT = """<script>
(function () {
  var root = document.documentElement;
  function column(table, index) {
    return Array.prototype.filter.call(document.getElementById(table).tBodies[0].rows, function (r) {
      return !r.hidden;
    }).map(function (r) { return r.cells[index].textContent.trim(); }).join(",");
  }
  var nodeHead = document.querySelector("#node-table thead th");
  nodeHead.click(); nodeHead.click();
  root.setAttribute("data-nodes-descending", column("node-table", 0));
  document.querySelectorAll("#node-table thead th")[1].click();
  root.setAttribute("data-by-verdict", column("node-table", 1));
  var failHead = document.querySelectorAll("#check-table thead th")[3];
  failHead.click(); failHead.click();
  root.setAttribute("data-top-check", document.querySelector("#check-table tbody tr").cells[0].textContent.trim());
  var filter = document.querySelector("input[data-filter='node-table']");
  filter.value = "sim03";
  filter.dispatchEvent(new Event("input"));
  root.setAttribute("data-filtered", column("node-table", 0));
  root.setAttribute("data-count", document.querySelector("[data-count='node-table']").textContent);
  filter.value = "";
  filter.dispatchEvent(new Event("input"));
  var only = document.querySelector("select[data-filter='node-table']");
  only.value = "rejected";
  only.dispatchEvent(new Event("change"));
  root.setAttribute("data-rejected", column("node-table", 0));
  root.setAttribute("data-pwned", String(window.__pwned));
  root.setAttribute("data-errors", window.__errors.join(" | "));
})();
</script>"""


def test_tables_sort_and_filter_in_the_browser(chromium: str, hostile_run: Path, tmp_path: Path) -> None:
    """A copy of the page with a probe script that clicks and types, as a user would (CSP lifted for it)."""
    page = hostile_run.read_text()
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    page = page.replace("<head>", "<head>" + PROBE, 1).replace("</body>", ACT + "</body>", 1)
    probe = tmp_path / "probe.html"
    probe.write_text(page)
    dom, log = dump_dom(chromium, probe, tmp_path / "profile")
    attributes = dict(re.findall(r' data-([a-z-]+)="([^"]*)"', dom[:dom.index(">", dom.index("<html"))]))
    assert attributes["report-ready"] == "1"
    assert attributes["errors"] == "", attributes["errors"]
    assert attributes["nodes-descending"] == "sim04,sim03,sim02,sim01"
    assert attributes["by-verdict"].split(",") == ["admitted"] * 3 + ["rejected"]
    assert attributes["top-check"] == "GPU-10", "sorted by failures, most first"
    assert attributes["filtered"] == "sim03" and attributes["count"] == "1 of 4 rows"
    assert attributes["rejected"] == "sim03"
    assert attributes["pwned"] == "undefined", "even without the CSP the node's script never ran"
    assert console_errors(log) == []
