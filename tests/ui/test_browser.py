"""The explorer in a real browser: JupyterLab on 127.0.0.1 (random free port, a token),
headless Chromium (Debian's ``chromium``, driven by Playwright; no browser download) opens
notebook 01 with the smoke profile, runs every cell, finds the OLA explorer, types a new
sentence, changes the order and the sink toggle, and checks that the rendered heatmap
changes each time and that the browser console shows no error. A screenshot is saved in the
test's temporary folder, or where ``$OLAS_SCREENSHOT`` says: ``make screenshot`` writes the
README's ``figures/explorer_jupyterlab.png`` that way (a plain test run leaves the committed
figure alone).

The test fails (it is never skipped) when Chromium or Playwright is missing: ``make test``
installs both. Set ``OLAS_CHROMIUM`` to use another Chromium binary. The kernel runs with
one thread (``OMP_NUM_THREADS=1``) on the CPU.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_ola_gallery.ipynb"
#: the README's screenshot (written only when $OLAS_SCREENSHOT names it: ``make screenshot``).
SCREENSHOT = ROOT / "figures" / "explorer_jupyterlab.png"
NEW_SENTENCE = "Rain fell all night on the quiet old harbour ."
SERVER_START_S = 90  # JupyterLab answering /api/status
KERNEL_START_S = 90  # the notebook's kernel idle
RUN_ALL_S = 420  # every cell of notebook 01 (smoke profile, one CPU thread)
UPDATE_S = 120  # one explorer redraw after a control changes
ACTION_MS = 30_000  # Playwright's default for one click / fill / wait


def _chromium() -> str:
    """Path of the Chromium binary; fails the test (never skips it) if there is none."""
    path = os.environ.get("OLAS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(
            f"Chromium is missing ({path or 'no chromium on PATH'}): the browser test needs Debian's "
            "chromium (`make test` installs it; or `apt-get install chromium`, or set OLAS_CHROMIUM=/path)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is missing: `make install` (or pip install -r requirements.txt -c constraints.txt)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_copy(folder: Path, figures: Path) -> Path:
    """Notebook 01 with its parameters set for the smoke profile, as papermill would."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(NOTEBOOK))
    nb = parameterize_notebook(nb, {"profile": "smoke", "figures_dir": str(figures), "device": "cpu"})
    out = folder / NOTEBOOK.name
    nbformat.write(nb, out)
    return out


def _kill_tree(proc: subprocess.Popen, runtime: Path) -> None:
    """Stop the server (its process group) and any kernel it started (their command line
    names a connection file in ``runtime``, which only this test uses)."""
    import psutil

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    for p in psutil.process_iter(["cmdline"]):
        if any(str(runtime) in part for part in (p.info["cmdline"] or [])):
            p.kill()


def _wait_for_server(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with code {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer {url.split('?')[0]} within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def chromium() -> str:
    """The Chromium binary (checked before JupyterLab is started)."""
    return _chromium()


@pytest.fixture
def jupyterlab(chromium, tmp_path):
    """A JupyterLab server on the smoke copy of notebook 01: yields ``(base_url, token,
    log path)``; the server and its kernels are stopped afterwards, whatever happened."""
    work, runtime = tmp_path / "work", tmp_path / "runtime"
    work.mkdir()
    runtime.mkdir()
    _smoke_copy(work, tmp_path / "figures")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OLAS_DEVICE": "cpu",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "JUPYTER_RUNTIME_DIR": str(runtime),
            "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
            "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
        }
    )
    log = tmp_path / "jupyterlab.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_server(proc, f"{base}/api/status?token={token}", log)
        yield base, token, log
    finally:
        _kill_tree(proc, runtime)


def _pixels_of(img) -> bytes:
    """The explorer image as the browser decoded it: its natural-size pixels, redrawn on a
    canvas and read back as PNG (no network request, so a just-revoked blob URL of the
    previous image cannot fail); empty while the image is still loading."""
    url = img.evaluate(
        "(el) => { if (!el.complete || !el.naturalWidth) return '';"
        " const c = document.createElement('canvas');"
        " c.width = el.naturalWidth; c.height = el.naturalHeight;"
        " c.getContext('2d').drawImage(el, 0, 0); return c.toDataURL('image/png'); }"
    )
    return base64.b64decode(url.split(",", 1)[1]) if url else b""


def _digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def _heatmap_change(a: bytes, b: bytes) -> float:
    """Fraction of pixels that differ between two explorer images in their upper 75 %:
    the heatmaps and colour bars, not the caption under them (which also names the
    settings, so a changed caption alone must not count as a changed heatmap)."""
    import io

    import numpy as np
    from PIL import Image

    x, y = (np.asarray(Image.open(io.BytesIO(p)).convert("RGB"), dtype=np.int16) for p in (a, b))
    if x.shape != y.shape:
        return 1.0
    top = int(x.shape[0] * 0.75)
    return float((np.abs(x[:top] - y[:top]).sum(axis=2) > 24).mean())


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.real_model
def test_explorer_in_jupyterlab(chromium, jupyterlab, tmp_path):
    shot = Path(os.environ.get("OLAS_SCREENSHOT") or tmp_path / SCREENSHOT.name)
    from playwright.sync_api import expect, sync_playwright

    base, token, log = jupyterlab
    console_errors: list[str] = []

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(ACTION_MS)
            page.on(
                "console", lambda m: console_errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None
            )
            page.on("pageerror", lambda e: console_errors.append(f"pageerror: {e}"))
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
            expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=60_000)
            expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible()
            # the kernel has started when the status bar says "Python 3 (ipykernel) | Idle"
            expect(page.get_by_role("button", name=re.compile(r"\| Idle$"))).to_be_visible(
                timeout=KERNEL_START_S * 1000
            )
            news = page.get_by_role("button", name="No", exact=True)  # "get notified about Jupyter news?"
            if news.count():
                news.first.click()
            # Run > Run All Cells, as a reader would (menu items carry their command id)
            page.locator(".lm-MenuBar-item", has_text="Run").filter(has_text=re.compile(r"^Run$")).click()
            page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
            dialog = page.locator(".jp-Dialog")
            if dialog.count():
                pytest.fail(f"JupyterLab asked: {dialog.inner_text()!r}")

            explorer = page.locator(".jp-OutputArea-output .widget-vbox").last
            img = explorer.locator(".widget-image")
            expect(img).to_be_visible(timeout=RUN_ALL_S * 1000)
            page.wait_for_function("(el) => el.src && el.naturalWidth > 0", arg=img.element_handle(), timeout=60_000)
            status = explorer.locator(".widget-html-content").first

            def changed(before_png: bytes, before_status: str, what: str) -> tuple[bytes, str]:
                deadline = time.monotonic() + UPDATE_S
                while time.monotonic() < deadline:
                    png, text = _pixels_of(img), status.inner_text()
                    if png and png != before_png and text != before_status:
                        return png, text
                    page.wait_for_timeout(500)
                pytest.fail(f"the heatmap did not change after {what} within {UPDATE_S} s (status: {text!r})")

            png0, status0 = _pixels_of(img), status.inner_text()
            shot0 = img.screenshot()
            assert png0[:4] == b"\x89PNG" and "order 1" in status0 and "sinks removed" in status0, status0

            sentence = explorer.locator(".widget-text input")
            sentence.fill(NEW_SENTENCE)
            sentence.press("Enter")
            png1, status1 = changed(png0, status0, "typing a new sentence")
            n = len(NEW_SENTENCE.split())
            assert f"({n}×{n})" in status1, status1

            explorer.locator(".widget-dropdown select").nth(2).select_option(label="order 2")
            png2, status2 = changed(png1, status1, "choosing order 2")
            assert "order 2" in status2, status2

            explorer.locator(".widget-checkbox input[type=checkbox]").click()
            png3, status3 = changed(png2, status2, "turning sink removal off")
            assert "with sinks" in status3 and "order 2" in status3 and f"({n}×{n})" in status3, status3

            assert len({_digest(p) for p in (png0, png1, png2, png3)}) == 4
            # the heatmaps themselves changed each time, over a sizeable area (not just titles)
            moved = [_heatmap_change(a, b) for a, b in ((png0, png1), (png1, png2), (png2, png3))]
            assert min(moved) > 0.05, f"fraction of heatmap pixels changed per step: {moved}"
            assert img.screenshot() != shot0, "the rendered image looks the same as before the changes"
            errors = page.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text="Traceback"
            )
            assert errors.count() == 0, errors.first.inner_text()

            side = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
            if side.count():  # fold the file browser away: more room for the explorer
                side.first.click()
            explorer.scroll_into_view_if_needed()
            shot.parent.mkdir(parents=True, exist_ok=True)
            tmp = shot.with_name(f".{shot.name}.tmp.png")
            page.screenshot(path=str(tmp))
            tmp.replace(shot)
        finally:
            browser.close()
    assert not console_errors, "browser console errors:\n" + "\n".join(console_errors)
    assert shot.stat().st_size > 20_000


def _notebook_links() -> set[str]:
    """Relative links (``[text](target)``) in the notebooks' markdown cells, resolved from
    notebooks/ to repository paths, anchors dropped."""
    import json
    import posixpath

    out = set()
    for nb in NOTEBOOK.parent.glob("*.ipynb"):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"])):
                if "://" in target or target.startswith(("#", "mailto:")):
                    continue
                out.add(posixpath.normpath(posixpath.join("notebooks", target.split("#")[0])))
    return out


def _committed_outputs() -> set[str]:
    """One executed notebook and one figure, as committed."""
    picks = [next(iter(sorted((ROOT / "results" / "executed").glob("*.ipynb"))), None)]
    picks.append(next(iter(sorted((ROOT / "figures").glob("*.png"))), None))
    return {p.relative_to(ROOT).as_posix() for p in picks if p is not None}


@contextlib.contextmanager
def _make_lab(tmp_path: Path, data: Path):
    """`make lab` (set-up steps skipped) on a free port with a token: yields ``(base_url, token,
    log path)``; the server and its kernels are stopped afterwards, whatever happened."""
    if not shutil.which("make"):
        pytest.fail("make is missing: the README's commands need it")
    port, token = _free_port(), secrets.token_hex(16)
    runtime = tmp_path / "runtime"
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
    )
    cmd = [
        "make",
        "-s",
        "-o",
        "install",
        "-o",
        "models",
        "lab",
        f"VENV={sys.prefix}",
        f"LAB_PORT={port}",
        f"OLAS_DATA_DIR={data}",
        f"LAB_ARGS=--no-browser --IdentityProvider.token={token} "
        "--ServerApp.terminals_enabled=False --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = tmp_path / "make_lab.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(proc, f"{base}/api/status?token={token}", log)
        yield base, token, log
    finally:
        _kill_tree(proc, runtime)


@pytest.mark.browser
def test_a_docs_link_in_a_notebook_opens_the_page_in_make_lab(chromium, tmp_path):
    """Headless Chromium in `make lab`: open notebook 02, click its first link to docs/method.md
    in the rendered markdown, and the lab opens method.md in a tab of its own, showing its text
    (with the lab's root at notebooks/ the link pointed outside it and the lab could not open it)."""
    from playwright.sync_api import expect, sync_playwright

    notebook = ROOT / "notebooks" / "02_cross_lm_similarity.ipynb"
    method_lines = {line.strip() for line in (ROOT / "docs" / "method.md").read_text().splitlines() if len(line) > 40}
    data = tmp_path / "data"
    data.mkdir()
    with _make_lab(tmp_path, data) as (base, token, log), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(ACTION_MS)
            page.goto(f"{base}/lab/tree/notebooks/{notebook.name}?token={token}")
            link = page.locator('.jp-RenderedMarkdown a[href*="docs/method.md"]').first
            expect(link).to_be_visible(timeout=90_000)
            link.click()
            expect(page.locator(".lm-TabBar-tab", has_text="method.md").first).to_be_visible(timeout=60_000)
            shown = page.locator("#jp-main-dock-panel .jp-MainAreaWidget:visible")
            expect(shown.first).to_be_visible()
            deadline, text = time.monotonic() + 60, ""
            while time.monotonic() < deadline and not any(line in text for line in method_lines):
                time.sleep(0.5)
                text = "\n".join(shown.all_inner_texts())
            assert any(line in text for line in method_lines), (text[:2000], log.read_text()[-2000:])
            assert not page.locator(".jp-Dialog").count(), page.locator(".jp-Dialog").inner_text()
        finally:
            browser.close()


@pytest.mark.browser
def test_make_lab_serves_the_notebooks_with_the_project_kernel(tmp_path):
    """`make lab` (the README's third command, set-up steps skipped): JupyterLab serves the
    repository root and opens on notebooks/; every relative link in the notebooks' markdown
    (``../docs/method.md#...``, resolved from notebooks/ as JupyterLab resolves it) opens a file the
    lab serves, and so do the README, the executed notebooks and the figures; a notebook's kernel is
    the venv's Python with OLAS_DATA_DIR set, running in notebooks/."""
    import json

    import psutil

    data = tmp_path / "data"
    data.mkdir()
    with _make_lab(tmp_path, data) as (base, token, log):
        with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=10) as r:
            top = {c["name"] for c in json.load(r)["content"]}
        assert {"README.md", "docs", "notebooks", "figures", "results"} <= top, top
        with urllib.request.urlopen(f"{base}/api/contents/notebooks?token={token}", timeout=10) as r:
            names = {c["name"] for c in json.load(r)["content"]}
        assert {p.name for p in NOTEBOOK.parent.glob("[0-9][0-9]_*.ipynb")} <= names, names
        with urllib.request.urlopen(f"{base}/?token={token}", timeout=30) as r:  # the lab opens on notebooks/
            assert r.geturl().split("?")[0].endswith("/lab/tree/notebooks"), r.geturl()
        links = _notebook_links()
        assert any(p.startswith("docs/") for p in links), links
        for path in sorted(links | {"README.md", "docs/method.md"} | _committed_outputs()):
            with urllib.request.urlopen(f"{base}/files/{urllib.parse.quote(path)}?token={token}", timeout=30) as r:
                assert r.status == 200 and r.read() == (ROOT / path).read_bytes(), path
        body = json.dumps(
            {"path": NOTEBOOK.relative_to(ROOT).as_posix(), "type": "notebook", "kernel": {"name": "python3"}}
        )
        req = urllib.request.Request(f"{base}/api/sessions?token={token}", data=body.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            kernel_id = json.load(r)["kernel"]["id"]
        deadline, kernel = time.monotonic() + KERNEL_START_S, None
        while kernel is None and time.monotonic() < deadline:
            kernel = next(
                (
                    p
                    for p in psutil.process_iter(["cmdline"])
                    if any(kernel_id in part for part in (p.info["cmdline"] or []))
                ),
                None,
            )
            time.sleep(0.2)
        assert kernel is not None, f"no kernel process for {kernel_id}:\n{log.read_text()[-2000:]}"
        assert kernel.cmdline()[0] == str(Path(sys.prefix) / "bin" / "python"), kernel.cmdline()
        assert kernel.environ().get("OLAS_DATA_DIR") == str(data)
        assert Path(kernel.cwd()) == NOTEBOOK.parent
