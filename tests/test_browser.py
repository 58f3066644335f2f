"""A real browser: JupyterLab on localhost, Debian's Chromium driven by Playwright.

Opens the quickstart, runs it, waits for the live widget, checks the operator rows and the
highlighted bottleneck render and that the numbers change while it runs, clicks
"Bottleneck step", and saves screenshots in the test's output folder (and in
$PLUMBKIT_SCREENSHOT_DIR when set, which is how the README's picture is made).
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EXPORT_CELL = """%%plumb -s 2
import tensorflow as tf
def busy(x):  # deterministic work: the optimizer may cache and parallelize it
    return tf.reduce_sum(tf.linalg.matmul(tf.fill([48, 48], tf.cast(x, tf.float32)), tf.ones([48, 48])))
ds = tf.data.Dataset.range(4000).map(busy).batch(16)
ds"""


def export_notebook(path: Path) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext plumbkit"), nbformat.v4.new_code_cell(EXPORT_CELL)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def lab(tmp_path):
    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "01-quickstart.ipynb", work)
    export_notebook(work / "export.ipynb")
    port, token = free_port(), "plumbkit-test"
    settings = tmp_path / "lab-settings"  # no "Jupyter news?" prompt over the widget
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JUPYTERLAB_SETTINGS_DIR=str(settings))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
         "--LabApp.news_url=", f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--ServerApp.disable_check_xsrf=True", "--allow-root"],
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


@contextlib.contextmanager
def chromium_page():
    """A page in Debian's headless Chromium, launched with the flags the machine needs."""
    from playwright.sync_api import sync_playwright
    assert Path(CHROMIUM).exists(), "install Debian's chromium (apt-get install chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


def open_and_run_all(page, url: str, token: str, notebook: str) -> None:
    page.goto(f"{url}/lab/tree/{notebook}?token={token}")
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    time.sleep(2)
    select = page.locator(".jp-Dialog button", has_text="Select")
    if select.count():
        select.first.click()  # JupyterLab sometimes asks which kernel to start
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible", timeout=60_000)
    page.get_by_role("menuitem", name="Run", exact=True).click(timeout=20_000)
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=20_000)


def test_quickstart_live_widget_in_chromium(lab, tmp_path):
    url, token = lab
    shots = [tmp_path / "widget.png", tmp_path / "step.png"]
    with chromium_page() as page:
        open_and_run_all(page, url, token, "01-quickstart.ipynb")
        try:
            page.wait_for_selector(".plumbkit-table", timeout=180_000)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        status = page.locator(".widget-label", has_text="minibatches/s").first
        status.wait_for(timeout=60_000)
        first = status.inner_text()
        time.sleep(1.5)
        second = status.inner_text()
        assert first != second, "the live numbers did not change while tracing"
        rows = [r.inner_text() for r in page.locator("tr.plumbkit-row").all()]
        assert any("map(decode_image)" in row for row in rows), rows
        assert page.locator("tr.plumbkit-bottleneck").count() == 1
        assert page.locator("tr.plumbkit-bottleneck").first.inner_text().startswith("▶")
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
        page.wait_for_selector(".plumbkit-step-chart polyline", state="visible", timeout=120_000)
        chosen = page.locator(".plumbkit-step-history").first.inner_text()
        assert "bottleneck: 1: map(" in chosen, chosen
        page.screenshot(path=str(shots[1]))
    for shot in shots:
        assert shot.stat().st_size > 10_000
    target = os.environ.get("PLUMBKIT_SCREENSHOT_DIR")
    if target:
        for shot in shots:
            shutil.copy(shot, Path(target) / shot.name)


def test_optimize_then_export_inserts_the_rewritten_cell_below(lab, tmp_path):
    """The widget's Export button adds a cell through JupyterLab's commands (via ipylab)."""
    url, token = lab
    with chromium_page() as page:
        open_and_run_all(page, url, token, "export.ipynb")
        try:
            page.wait_for_selector(".plumbkit-table", timeout=180_000)
            page.get_by_role("tab", name="Optimize").click()
            page.get_by_role("button", name="Optimize").click()
            page.wait_for_selector(".plumbkit-plan", timeout=300_000)
            page.get_by_role("button", name="Export").click()
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-CodeCell').length == 3",
                                   timeout=30_000)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        cells = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor")
        for _ in range(50):  # the command writes the text just after inserting the cell
            if "prefetch(" in cells.nth(2).inner_text():
                break
            time.sleep(0.2)
        exported = cells.nth(2).inner_text()
        page.screenshot(path=str(tmp_path / "export.png"))
    # the user's cell (function, comment) below the %%plumb cell, with the plan written in: the
    # finite deterministic pipeline fits in memory, so it is cached, then prefetched
    assert "def busy(x):  # deterministic work" in exported, exported
    assert ".batch(16).cache().prefetch(" in exported, exported
    assert "%%plumb" not in exported
