"""The set-up files agree with each other."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines):
    return {
        m.group(1).lower(): m.group(2) for m in (re.match(r"\s*-?\s*([A-Za-z0-9_.\-]+)==(\S+)", l) for l in lines) if m
    }


def test_environment_yml_mirrors_requirements():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env_lines = (ROOT / "environment.yml").read_text().split("- pip:")[1].splitlines()
    assert req and _pins(env_lines) == req


def test_every_requirement_is_pinned_and_constrained_identically():
    req_lines = [l for l in (ROOT / "requirements.txt").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert all("==" in l for l in req_lines), req_lines
    cons = _pins((ROOT / "constraints.txt").read_text().splitlines())
    for name, ver in _pins(req_lines).items():
        assert cons.get(name) == ver, (name, ver, cons.get(name))


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci.splitlines()[-1]
    assert "make test" in readme and "make reproduce" in readme


def test_the_readme_stays_a_front_door():
    """The README is read in minutes: at most 15,000 bytes, with its findings before the install
    (run logs and timings live in docs/)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    size = len(readme.encode("utf-8"))
    assert size <= 15_000, f"README.md is {size:,} bytes; move detail to docs/ (the front door holds at most 15,000)"
    headings = [line for line in readme.splitlines() if line.startswith("## ")]
    find = [i for i, h in enumerate(headings) if "found" in h.lower() or "finding" in h.lower()]
    install = [i for i, h in enumerate(headings) if "install" in h.lower()]
    assert find and install and find[0] < install[0], headings


# --- the wheel: `pip install .` into someone else's environment --------------------------------

#: what the package imports at run time (any module of olas_utils) and what each extra must bring
RUNTIME = {"torch", "transformers", "numpy", "scipy", "pandas", "statsmodels", "safetensors", "tqdm", "matplotlib"}
EXTRAS = {
    "notebooks": {"papermill", "jupyterlab", "ipywidgets", "ipykernel"},
    "dev": {"pytest", "ruff", "playwright"},
    "interop": {"bertviz", "transformer-lens", "nnsight"},
}


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheel_metadata(tmp_path_factory):
    """The METADATA of the wheel built from a copy of the sources (so no build folder or
    egg-info lands in the checkout), parsed by the standard library's email parser."""
    import email
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "olas_utils", src / "olas_utils", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (whl,) = out.glob("olas-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(meta)), names, whl


def _requires(meta) -> dict[str | None, dict[str, str]]:
    """``{extra or None: {canonical name: specifier}}`` from the Requires-Dist lines."""
    from packaging.requirements import Requirement

    out: dict = {}
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        extra = None
        if req.marker is not None:
            m = re.search(r'extra\s*==\s*"([^"]+)"', str(req.marker))
            extra = m.group(1) if m else None
        out.setdefault(extra, {})[_canon(req.name)] = str(req.specifier)
    return out


def test_the_wheel_declares_runtime_dependencies_and_extras(wheel_metadata):
    meta, names, _ = wheel_metadata
    req = _requires(meta)
    assert meta["Name"] == "olas"
    assert any(n.startswith("olas_utils/") and n.endswith("extract.py") for n in names)
    missing = {_canon(n) for n in RUNTIME} - set(req.get(None, {}))
    assert not missing, f"runtime dependencies missing from the wheel: {sorted(missing)}"
    assert set(meta.get_all("Provides-Extra") or []) >= set(EXTRAS)
    for extra, wanted in EXTRAS.items():
        lacking = {_canon(n) for n in wanted} - set(req.get(extra, {}))
        assert not lacking, f"extra {extra!r} lacks {sorted(lacking)}"
    # ranges, not pins: a pinned dependency cannot live beside a user's own versions
    pinned = [f"{n}{s}" for deps in req.values() for n, s in deps.items() if "==" in s or not s]
    assert not pinned, f"exact pins or unbounded requirements in the wheel: {pinned}"


def test_every_declared_range_admits_the_pinned_version(wheel_metadata):
    """`make install` installs constraints.txt's pins, then OLAS with --no-deps: a range that
    excluded the pin would make `pip install .` disagree with the tested environment."""
    from packaging.specifiers import SpecifierSet

    cons = {_canon(n): v for n, v in _pins((ROOT / "constraints.txt").read_text().splitlines()).items()}
    req = _requires(wheel_metadata[0])
    bad, unpinned = [], []
    for extra, deps in req.items():
        for name, spec in deps.items():
            if name not in cons:
                unpinned.append(f"{name} ({extra or 'runtime'})")
            elif cons[name] not in SpecifierSet(spec):
                bad.append(f"{name}{spec} excludes the pinned {cons[name]} ({extra or 'runtime'})")
    assert not bad, "\n".join(bad)
    assert not unpinned, f"declared but not pinned in constraints.txt: {unpinned}"


def test_the_package_imports_only_what_it_declares():
    """Every third-party module imported anywhere in olas_utils (read with ast) is a declared
    runtime dependency or comes with a declared extra (lazy imports included)."""
    import ast
    import sys

    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    from packaging.requirements import Requirement

    declared = {_canon(Requirement(r).name) for r in project["dependencies"]}
    for deps in project["optional-dependencies"].values():
        declared |= {_canon(Requirement(r).name) for r in deps}
    # import name -> distribution name where they differ
    dist = {"sklearn": "scikit-learn", "huggingface_hub": "huggingface-hub", "axial_attention": "axial-attention"}
    imported = set()
    for path in (ROOT / "olas_utils").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m not in ("olas_utils", "__future__")}
    undeclared = sorted(m for m in third_party if _canon(dist.get(m, m)) not in declared)
    assert not undeclared, f"imported by olas_utils but not declared in pyproject.toml: {undeclared}"


@pytest.mark.slow  # 29 s measured alone at 1 thread (docs/testing.md)
def test_a_bare_venv_resolves_the_wheel_with_the_notebooks_extra(wheel_metadata, tmp_path):
    """`pip install olas[notebooks]` into a bare venv (no OLAS pins) resolves: pip's dry run
    (about 40 s; it installs nothing) picks torch 2.14.1, the one this machine's disk holds, and a
    version of every runtime and notebooks requirement that the wheel's ranges admit.
    (The full install, 183 packages with CUDA wheels, is checked by hand: docs/install.md.)"""
    import json
    import os
    import subprocess
    import sys

    from packaging.specifiers import SpecifierSet

    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    report = tmp_path / "report.json"
    whl = wheel_metadata[2]
    # pip unpacks every wheel it looks at under $TMPDIR and leaves them there when it is stopped;
    # a resolver that backtracks through a package's versions once left 42 GB in /tmp. Point it
    # into tmp_path, which pytest prunes, so nothing of this test outlives the last few sessions.
    pip_tmp = tmp_path / "pip-tmp"
    pip_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(pip_tmp)}
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--dry-run", "-q",
         "--report", str(report), "torch==2.14.1", f"{whl}[notebooks]"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    chosen = {
        _canon(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    assert chosen["torch"] == "2.14.1" and chosen["olas"] == "0.1.0"
    req = _requires(wheel_metadata[0])
    for extra in (None, "notebooks"):
        for name, spec in req[extra].items():
            assert name in chosen, f"{name} ({extra or 'runtime'}) would not be installed"
            assert chosen[name] in SpecifierSet(spec), (name, chosen[name], spec)
