"""Running a notebook in a test: its outputs and the errors among them."""

from __future__ import annotations

import json


def run_outputs(path, tmp_path, profile: str, **parameters) -> list[dict]:
    """Run notebook ``path`` with ``profile`` (and ``parameters``) into ``tmp_path``'s ``figures`` and
    ``results`` folders; every output of its code cells, in order."""
    from olas_utils.ui.reproduce import run_notebook

    out = run_notebook(
        path,
        tmp_path / path.name,
        profile=profile,
        parameters={"figures_dir": str(tmp_path / "figures"), "results_dir": str(tmp_path / "results"), **parameters},
        progress=False,
    )
    cells = json.loads(out.read_text())["cells"]
    return [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]


def errors_of(outputs: list[dict]) -> list[dict]:
    """The error outputs among ``outputs``."""
    return [o for o in outputs if o.get("output_type") == "error"]
