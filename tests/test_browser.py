"""A real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright.

One JupyterLab and one page serve the module's tests (the app loads once); each test opens its
notebook there. Opens the quickstart, runs it, waits for the live widget, checks the operator
rows and the highlighted bottleneck render, that the numbers change while it runs and that the
table fits the widget, clicks "Bottleneck step"; runs the one-shot ``%%plumb --optimize
--export`` cell and checks the same widget ends on its Optimize tab with the answer in one line,
predicted and measured paired per configuration, the details folded, and that the rewritten
cell was inserted below, then again by the widget's Export button; and saves screenshots in the
test's output folder (and in $PLUMBKIT_SCREENSHOT_DIR when set, which is how docs/*.png are made).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrent  # checks what is yielded, shown or written, not a speed (tests/run)

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EXPORT_CELL = """%%plumb -s 1 --protocol brief
import tensorflow as tf
def busy(x):  # deterministic work: the optimizer may cache and parallelize it
    return tf.reduce_sum(tf.linalg.matmul(tf.fill([48, 48], tf.cast(x, tf.float32)), tf.ones([48, 48])))
ds = tf.data.Dataset.range(4000).map(busy).batch(16)
ds"""


def export_notebook(path: Path, cell: str = EXPORT_CELL) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext plumbkit"), nbformat.v4.new_code_cell(cell)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


#: The one-shot path of the design card: trace live, optimize in the cell, propose the new cell.
ONE_SHOT_CELL = EXPORT_CELL.replace("%%plumb -s 1", "%%plumb -s 1 --optimize --export --memory-budget 200MB")
assert "--optimize" in ONE_SHOT_CELL


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """One JupyterLab for the module (starting it takes seconds); each test opens its notebook."""
    tmp_path = tmp_path_factory.mktemp("jupyterlab")
    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "01-quickstart.ipynb", work)
    export_notebook(work / "one-shot.ipynb", ONE_SHOT_CELL)
    port, token = free_port(), "plumbkit-test"
    settings = tmp_path / "lab-settings"  # no "Jupyter news?" prompt over the widget
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JUPYTERLAB_SETTINGS_DIR=str(settings))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
         "--LabApp.news_url=", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
         "--LabApp.expose_app_in_browser=True",  # the tests open notebooks through its commands
         "--ServerApp.disable_check_xsrf=True", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "lab.log", "w"), env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("JupyterLab did not start: " + (tmp_path / "lab.log").read_text()[-2000:])
    yield url, token
    proc.terminate()
    proc.wait(20)


@pytest.fixture(scope="module")
def lab_page(jupyterlab):
    """One headless Chromium page on JupyterLab for the module: the app loads once, and each
    test opens its notebook in it (see :func:`notebook`)."""
    from playwright.sync_api import sync_playwright
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install chromium)"
    url, token = jupyterlab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab?reset&token={token}")  # no tabs restored from an earlier run
            page.wait_for_function("window.jupyterapp && window.jupyterapp.commands.hasCommand("
                                   "'notebook:run-all-cells')", timeout=120_000)
            yield page
        finally:
            browser.close()


def command(page, name: str, args: dict | None = None) -> None:
    """Run a JupyterLab command in the page (as a menu item or a shortcut would)."""
    page.evaluate("([name, args]) => window.jupyterapp.commands.execute(name, args)", [name, args or {}])


@pytest.fixture
def notebook(lab_page, jupyterlab):
    """``notebook(name)`` opens a notebook in the shared page and runs all its cells. Afterwards
    every kernel is shut down (a live trace left running would take the cores from the next
    test) and every tab closed, so the next test's selectors see its notebook alone."""
    page = lab_page

    def open_and_run_all(name: str):
        command(page, "docmanager:open", {"path": name})
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        select = page.locator(".jp-Dialog button", has_text="Select")
        if select.count():
            select.first.click()  # JupyterLab sometimes asks which kernel to start
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible", timeout=60_000)
        command(page, "notebook:run-all-cells")
        return page

    yield open_and_run_all
    url, token = jupyterlab
    sessions = json.loads(urllib.request.urlopen(f"{url}/api/sessions?token={token}", timeout=10).read())
    for session in sessions:
        urllib.request.urlopen(urllib.request.Request(f"{url}/api/sessions/{session['id']}?token={token}",
                                                      method="DELETE"), timeout=30)
    command(page, "application:close-all")
    for _ in range(40):  # a notebook changed since it was saved asks before it closes: discard
        discard = page.locator(".jp-Dialog button", has_text="Discard")
        if discard.count():
            discard.first.click()
        if not page.locator(".jp-NotebookPanel").count():
            break
        time.sleep(0.25)
    assert not page.locator(".jp-NotebookPanel").count(), "a notebook tab would not close"


def keep_screenshots(*shots: Path) -> None:
    """Copy the screenshots to $PLUMBKIT_SCREENSHOT_DIR when set (how docs/*.png are made)."""
    for shot in shots:
        assert shot.stat().st_size > 10_000
    target = os.environ.get("PLUMBKIT_SCREENSHOT_DIR")
    if target:
        for shot in shots:
            shutil.copy(shot, Path(target) / shot.name)


def failing_screenshot(page, tmp_path: Path):
    """On a failure, keep what the page showed (in the test's folder) and re-raise."""
    page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)


#: How far an element reaches beyond the narrowest box that clips or scrolls it (px; 0: it fits).
CLIPPED = """(t) => { let right = Infinity;
  for (let e = t.parentElement; e; e = e.parentElement)
    if (getComputedStyle(e).overflowX !== 'visible') right = Math.min(right, e.getBoundingClientRect().right);
  return Math.max(0, t.getBoundingClientRect().right - right); }"""
#: The live table's overflow: 0 when every column is in sight.
OVERFLOW = f"() => ({CLIPPED})(document.querySelector('.plumbkit-table'))"
#: The overflow of a copy of the live table made 1,600 px wide (more than the page): the
#: measure must see it (a copy, since the table itself is redrawn live).
WIDENED = f"""() => {{ const t = document.querySelector('.plumbkit-table');
  const copy = t.cloneNode(true); copy.className = ''; copy.style.minWidth = '1600px';
  t.parentElement.appendChild(copy);
  const over = ({CLIPPED})(copy); copy.remove(); return over; }}"""

#: Records in the page every status line the live widget shows while tracing (the browser sees
#: each redraw, however late a busy machine lets the test look).
WATCH_STATUS = """() => { window.plumbkitStatus = new Set();
  new MutationObserver(() => document.querySelectorAll('.widget-label').forEach(l => {
      if (l.textContent.startsWith('tracing ·')) window.plumbkitStatus.add(l.textContent); }))
    .observe(document.body, {subtree: true, childList: true, characterData: true}); }"""


def test_quickstart_live_widget_in_chromium(lab_page, notebook, tmp_path):
    shots = [tmp_path / "widget.png", tmp_path / "step.png"]
    lab_page.evaluate(WATCH_STATUS)
    page = notebook("01-quickstart.ipynb")
    try:
        page.wait_for_selector(".plumbkit-table", timeout=180_000)
        page.locator(".widget-label", has_text="minibatches/s").first.wait_for(timeout=60_000)
        page.wait_for_function("window.plumbkitStatus.size >= 2", timeout=60_000)
    except Exception:
        failing_screenshot(page, tmp_path)
        raise
    seen = page.evaluate("[...window.plumbkitStatus]")
    assert len(seen) >= 2, f"the live numbers did not change while tracing: {seen}"
    rows = [r.inner_text() for r in page.locator("tr.plumbkit-row").all()]
    assert any("map(decode_image)" in row for row in rows), rows
    assert page.locator("tr.plumbkit-bottleneck").count() == 1
    assert page.locator("tr.plumbkit-bottleneck").first.inner_text().startswith("▶")
    # every column fits in the widget, the last (GIL) included, with the file browser open
    assert page.evaluate(OVERFLOW) <= 1, "the live table is wider than the widget"
    assert page.locator(".plumbkit-table th").last.is_visible()
    # negative control: the same measure sees a table made wider than the page
    assert page.evaluate(WIDENED) > 100
    news = page.get_by_role("button", name="No")
    if news.count():
        news.first.click()  # JupyterLab's news prompt would cover the widget
    for _ in range(10):  # the table is redrawn several times a second: retry until it holds still
        try:
            page.locator(".plumbkit-table").first.scroll_into_view_if_needed(timeout=2_000)
            break
        except Exception:
            time.sleep(0.2)
    page.screenshot(path=str(shots[0]), full_page=False)
    page.get_by_role("tab", name="Step").click()
    page.get_by_role("button", name="Bottleneck step").click()
    try:
        page.wait_for_selector(".plumbkit-step-chart polyline", state="visible", timeout=120_000)
    except Exception:
        failing_screenshot(page, tmp_path)
        raise
    chosen = page.locator(".plumbkit-step-history").first.inner_text()
    # a step was taken and named in the history; which operator is the model's call (tested
    # on planted costs in test_optimize): here the decode map and batch(32), whose memory
    # copies calibrate at 0.6-1.2 ms a minibatch, come close enough to swap between runs
    assert re.search(r"bottleneck: 1: \w+\(", chosen), chosen
    page.screenshot(path=str(shots[1]))
    keep_screenshots(*shots)


def code_cells_text(page, count: int, must: str) -> list[str]:
    """The text of the notebook's code cells once there are ``count`` and the last holds ``must``."""
    page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-CodeCell').length == {count}",
                           timeout=30_000)
    cells = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor")
    for _ in range(50):  # the front end writes the text just after inserting the cell
        if must in cells.nth(count - 1).inner_text():
            break
        time.sleep(0.2)
    return [cells.nth(i).inner_text() for i in range(count)]


#: The optimize view's first line: the measured answer, then the predicted one (or why not).
HEADLINE = re.compile(r"^([\d.]+× faster than yours, measured|slower than yours: [\d.]+× its "
                      r"throughput, measured|no measurable change.*|too .*)(; predicted [\d.]+×)?$")


def test_one_shot_optimize_export_shows_the_widget_and_inserts_the_cell(notebook, tmp_path):
    """``%%plumb --optimize --export``: the widget traces live, ends on its Optimize tab with the
    answer in one line, each configuration's prediction and measurement paired, the details
    folded, and the rewritten cell appears below; then the widget's Export button inserts it
    again (one optimization serves both ways of exporting: it was a test of its own, ~25 s)."""
    shot = tmp_path / "optimize.png"
    page = notebook("one-shot.ipynb")
    try:
        # the live trace tab first (hidden once the Optimize tab is selected, maybe before the
        # page draws it on a busy machine)
        page.wait_for_selector(".plumbkit-table", state="attached", timeout=180_000)
        page.wait_for_selector(".plumbkit-plan", state="visible", timeout=300_000)
        texts = code_cells_text(page, 3, "def busy(x)")  # in the cell whichever is returned
    except Exception:
        failing_screenshot(page, tmp_path)
        raise
    selected = page.locator(".jp-OutputArea .lm-TabBar-tab.lm-mod-current").first.inner_text()
    headline = page.locator(".plumbkit-headline").first.inner_text()
    header = page.locator(".plumbkit-plan tr").first.inner_text()
    rows = {r.locator("td").first.inner_text(): r for r in page.locator("tr.plumbkit-config").all()}
    phase = page.locator(".plumbkit-phase").first.inner_text()
    details = page.locator("details.plumbkit-plan-details").first
    folded = not details.evaluate("e => e.open")
    page.locator(".plumbkit-result").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    assert selected == "Optimize", selected
    assert HEADLINE.match(headline), headline
    assert "measured" in header and "predicted" in header, header
    plumbkit_row = rows["plumbkit"].inner_text()
    assert len(re.findall(r"\d[\d,]*\.\d", plumbkit_row)) >= 2, plumbkit_row  # measured and predicted
    assert rows["plumbkit"].locator("td").last.locator("div").count() == 2  # the paired bars
    assert "no prediction (AUTOTUNE picks at run time)" in rows["autotune"].inner_text()
    assert folded and "what binds the prediction" in details.inner_text()
    assert "LP bound" not in page.locator(".plumbkit-result").first.inner_text()
    assert phase.startswith("done: measured"), phase
    # the rewrite caches the batches (where the cache goes follows from the graph and the sizes); a
    # prefetch at the top is a measured decision (test_optimize checks it both ways), not this test's.
    # Where the comparison did not measure the plan faster (beside two other tests on two cores, once
    # in a local run: "no measurable change"), yours is returned and the exported cell is your code.
    shipped = "faster than yours, measured" in headline
    expected = ".batch(16).cache()" if shipped else ".batch(16)\nds"
    assert "def busy(x):  # deterministic work" in texts[2] and expected in texts[2], (headline, texts[2])
    assert "%%plumb" not in texts[2]
    keep_screenshots(shot)
    # The same widget's Export button adds the cell again, through JupyterLab's commands (ipylab):
    # a click in the browser reaching the kernel and a cell inserted from a widget callback. (Its
    # Optimize button runs the same optimize; clicked in-process in test_notebook.)
    try:
        # (waiting for what the cell must hold: where yours was returned, that is not a cache; waiting
        # for ".cache()" there took 50 x 10 s before the asserts below passed, 593 s in one CI run)
        page.get_by_role("button", name="Export").click()
        texts = code_cells_text(page, 4, expected)
        for _ in range(50):  # inserted empty, then written: wait until both proposed cells hold the code
            if all(expected in t for t in texts[2:]):
                break
            time.sleep(0.2)
            texts = code_cells_text(page, 4, expected)
    except Exception:
        failing_screenshot(page, tmp_path)
        raise
    page.screenshot(path=str(tmp_path / "export.png"))
    # the user's cell (function, comment) with the plan written in: the finite deterministic
    # pipeline fits in memory, so it is cached
    for exported in texts[2:]:
        assert "def busy(x):  # deterministic work" in exported and expected in exported, (headline, texts)
        assert "%%plumb" not in exported
