"""The set-up files agree with each other."""

import re
from pathlib import Path

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
