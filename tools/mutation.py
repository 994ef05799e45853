"""A small mutation run over the core maths and statistics (docs/mutation.md).

Each mutant is a one-line edit of one module of ``olas_utils``: a line that must occur exactly
once in that module, and what replaces it. For each mutant the committed tree (``git archive
HEAD``, or the working tree with ``--worktree``) is unpacked into a fresh temporary folder, the
line is replaced there, and the tests listed for that module run there (``pytest -x``); the
mutant is *killed* when they fail, *survives* when they pass. The working tree is never
edited. A run without any mutant comes first: if the tests fail unmutated, nothing is scored.

    .venv/bin/python tools/mutation.py                 # every mutant, a table on stdout
    .venv/bin/python tools/mutation.py -k ola uniform  # the mutants whose id contains a word
    .venv/bin/python tools/mutation.py --list          # the mutants, nothing run
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Tests run against each module's mutants (node ids or files, relative to the repository).
FAST = ["-m", "not slow"]
TESTS = {
    "olas_utils/maths/ola.py": ["tests/core/test_ola.py"],
    "olas_utils/maths/uniform.py": [
        "tests/core/test_uniform.py",
        "tests/core/test_uniform_windows.py",
        "tests/core/test_uniform_mixing.py",
    ],
    "olas_utils/maths/mixing.py": ["tests/core/test_mixing.py"],
    "olas_utils/maths/flow.py": ["tests/core/test_flow.py"],
    "olas_utils/maths/sinks.py": ["tests/core/test_sinks.py"],
    "olas_utils/capture/attention.py": ["tests/core/test_capture_toy.py"],
    "olas_utils/stats/uncertainty.py": ["tests/core/test_uncertainty.py", "tests/core/test_across_models.py"],
    "olas_utils/stats/across_models.py": ["tests/core/test_across_models.py"],
    "olas_utils/align.py": ["tests/core/test_align.py", "tests/core/test_uniform.py"],  # neutral pooling in the latter
}


@dataclass(frozen=True)
class Mutant:
    id: str
    module: str
    line: str  # the original text (stripped of indentation), exactly once in the module
    mutated: str
    what: str


M = Mutant
MUTANTS = [
    # -- OLA: the order recurrence S_k += A·S_{k-1}, its normalisation and rollout
    M(
        "ola-recurrence-order",
        "olas_utils/maths/ola.py",
        "for k in range(top, 1, -1):",
        "for k in range(2, top + 1):",
        "orders updated low to high (S_{k-1} already the new layer's)",
    ),
    M(
        "ola-product-side",
        "olas_utils/maths/ola.py",
        "self._sums[k].baddbmm_(a, self._sums[k - 1])",
        "self._sums[k].baddbmm_(self._sums[k - 1], a)",
        "S_{k-1}·A instead of A·S_{k-1}",
    ),
    M(
        "ola-binomial-divisor",
        "olas_utils/maths/ola.py",
        "return self._sums[order] / comb(n, order)",
        "return self._sums[order] / comb(n, order - 1)",
        "divides by C(N, k-1)",
    ),
    M(
        "ola-rollout-no-identity",
        "olas_utils/maths/ola.py",
        "self._rollout = torch.baddbmm(self._rollout, a, self._rollout)",
        "self._rollout = torch.bmm(a, self._rollout)",
        "rollout without the residual identity",
    ),
    M(
        "ola-top-order",
        "olas_utils/maths/ola.py",
        "top = min(self.max_order, self.n_added + 1)",
        "top = min(self.max_order, self.n_added)",
        "the highest reachable order is not updated",
    ),
    # -- uniform attention
    M(
        "uniform-causal-triu",
        "olas_utils/maths/uniform.py",
        "allowed = allowed * torch.ones(t, t, device=m.device).tril()",
        "allowed = allowed * torch.ones(t, t, device=m.device).triu()",
        "a causal model looks ahead",
    ),
    M(
        "uniform-window-inclusive",
        "olas_utils/maths/uniform.py",
        "band = back < window if causal else back.abs() < window",
        "band = back <= window if causal else back.abs() <= window",
        "a sliding window one key wider",
    ),
    M(
        "uniform-divisor",
        "olas_utils/maths/uniform.py",
        "return torch.where(counts > 0, allowed / counts.clamp_min(1.0), torch.zeros_like(allowed))",
        "return torch.where(counts > 0, allowed / (counts + 1), torch.zeros_like(allowed))",
        "rows divided by one more than their keys",
    ),
    M(
        "uniform-product-side",
        "olas_utils/maths/uniform.py",
        "out = u @ out  # Π U(i), higher layer on the left",
        "out = out @ u",
        "the uniform product with the lower layer on the left",
    ),
    # -- sinks
    M(
        "sinks-biased-variance",
        "olas_utils/maths/sinks.py",
        "denom = (cnt - 1) if unbiased else cnt",
        "denom = cnt",
        "the unbiased variance divides by n",
    ),
    M(
        "sinks-threshold-variance",
        "olas_utils/maths/sinks.py",
        'thresh = torch.where(single, torch.full_like(mean, float("inf")), mean + n_sigma * std)',
        'thresh = torch.where(single, torch.full_like(mean, float("inf")), mean + n_sigma * std * std)',
        "threshold in variance, not standard deviations",
    ),
    M(
        "sinks-mean-divisor",
        "olas_utils/maths/sinks.py",
        "mean = xm.sum(-1) / cnt",
        "mean = xm.sum(-1) / (cnt + 1)",
        "the row mean over one more key",
    ),
    M(
        "sinks-no-argmax",
        "olas_utils/maths/sinks.py",
        "return above | is_max",
        "return above",
        "the row maximum is no longer always an outlier",
    ),
    M(
        "sinks-symmetrize-diagonal",
        "olas_utils/maths/sinks.py",
        "return lower + torch.tril(maps, diagonal=-1).transpose(-1, -2)",
        "return lower + torch.tril(maps, diagonal=0).transpose(-1, -2)",
        "the diagonal counted twice",
    ),
    # -- capture
    M(
        "capture-head-0",
        "olas_utils/capture/attention.py",
        "a = weights.float().mean(dim=1)",
        "a = weights.float()[:, 0]",
        "head 0 instead of the mean over heads",
    ),
    M(
        "capture-head-sum",
        "olas_utils/capture/attention.py",
        "a = weights.float().mean(dim=1)",
        "a = weights.float().sum(dim=1)",
        "the sum over heads, not the mean",
    ),
    M(
        "capture-mask-rows-only",
        "olas_utils/capture/attention.py",
        "keep = valid[:, :, None] & valid[:, None, :]",
        "keep = valid[:, :, None] & True",
        "padded key columns kept",
    ),
    # -- bootstrap and verdicts
    M(
        "uncertainty-tail",
        "olas_utils/stats/uncertainty.py",
        "tail = (1 - confidence) / 2",
        "tail = 1 - confidence",
        "a one-sided tail on each side (90 % interval)",
    ),
    M(
        "uncertainty-p-one-sided",
        "olas_utils/stats/uncertainty.py",
        "p = min(1.0, 2 * min((1 + np.sum(boot <= 0)) / b1, (1 + np.sum(boot >= 0)) / b1))",
        "p = min(1.0, min((1 + np.sum(boot <= 0)) / b1, (1 + np.sum(boot >= 0)) / b1))",
        "p not doubled",
    ),
    M(
        "uncertainty-holm-bonferroni",
        "olas_utils/stats/uncertainty.py",
        "if p[j] > alpha / (m - i):",
        "if p[j] > alpha / m:",
        "Bonferroni instead of Holm's step-down",
    ),
    M(
        "uncertainty-holm-alpha",
        "olas_utils/stats/uncertainty.py",
        "if p[j] > alpha / (m - i):",
        "if p[j] > alpha / (m - i + 1):",
        "Holm's divisor off by one",
    ),
    M(
        "uncertainty-mean-divisor",
        "olas_utils/stats/uncertainty.py",
        "return float(n.sum() / (d.sum() if d is not None else n.size))",
        "return float(n.sum() / (d.sum() if d is not None else n.shape[-1]))",
        "a mean over the items axis only",
    ),
    M(
        "uncertainty-verdict-sign",
        "olas_utils/stats/uncertainty.py",
        "out[i] = (BEATS if m.estimate > 0 else LOSES) if r and m.estimate != 0 else INDISTINGUISHABLE",
        "out[i] = (LOSES if m.estimate > 0 else BEATS) if r and m.estimate != 0 else INDISTINGUISHABLE",
        "beats and loses swapped",
    ),
    M(
        "uncertainty-resample-size",
        "olas_utils/stats/uncertainty.py",
        "return rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)",
        "return rng.multinomial(max(1, n // 2), np.full(n, 1.0 / n), size=b).astype(np.float64)",
        "resamples of half the units",
    ),
    # -- across models
    M(
        "across-min-p",
        "olas_utils/stats/across_models.py",
        "return min(1.0, 2.0 / 2.0**n)",
        "return min(1.0, 1.0 / 2.0**n)",
        "the smallest two-sided sign-flip p halved",
    ),
    M(
        "across-t-ddof",
        "olas_utils/stats/across_models.py",
        "half = stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)",
        "half = stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=0) / np.sqrt(v.size)",
        "t interval with the biased standard deviation",
    ),
    M(
        "across-p-strict",
        "olas_utils/stats/across_models.py",
        "return float(np.mean(np.abs(stats) >= abs(observed) - tol))",
        "return float(np.mean(np.abs(stats) > abs(observed) + tol))",
        "the observed sign vector not counted",
    ),
    M(
        "across-dyadic-one-side",
        "olas_utils/stats/across_models.py",
        "return _p_of((signs[:, t] * signs[:, s]) @ d / d.size, d.mean())",
        "return _p_of(signs[:, t] @ d / d.size, d.mean())",
        "pairs flipped by the target's sign only",
    ),
    # -- word alignment
    M(
        "align-row-sum",
        "olas_utils/align.py",
        "rows = row_pool @ maps",
        "rows = onehot.transpose(0, 1) @ maps",
        "a word's rows summed, not averaged",
    ),
    M(
        "align-column-mean",
        "olas_utils/align.py",
        "word_map = rows @ onehot",
        "word_map = rows @ (onehot / counts)",
        "a word's columns averaged, not summed",
    ),
    M(
        "align-word-spans",
        "olas_utils/align.py",
        "pos += len(w) + 1",
        "pos += len(w)",
        "word offsets without the separating space",
    ),
    M(
        "align-no-lift",
        "olas_utils/align.py",
        "return torch.where(ref > 0, pooled / torch.where(ref > 0, ref, torch.ones_like(ref)), torch.zeros_like(pooled))",
        "return pooled",
        "pooled maps not divided by the reference",
    ),
    # -- attention flow
    M(
        "flow-residual-normalisation",
        "olas_utils/maths/flow.py",
        "ahat = (a + np.eye(t)) / (1 + sums)[..., None]",
        "ahat = (a + np.eye(t)) / (2 + sums)[..., None]",
        "(A + I) rows not renormalised to 1",
    ),
    M(
        "flow-one-layer",
        "olas_utils/maths/flow.py",
        "out[:] = np.where(reach, caps[0][list(rows)], 0)",
        "out[:] = np.where(reach, caps[0][list(rows)] // 2, 0)",
        "a one-layer flow halved",
    ),
    M(
        "flow-one-layer-shortcut",
        "olas_utils/maths/flow.py",
        "return torch.from_numpy(ahat[0].astype(np.float32))",
        "return torch.from_numpy((ahat[0] / 2).astype(np.float32))",
        "attention_flow's one-layer answer halved (the branch flow-one-layer mutates is unreachable from it)",
    ),
    M(
        "flow-top-layer",
        "olas_utils/maths/flow.py",
        "data[: b * t] = caps[-1][outs].ravel()",
        "data[: b * t] = caps[0][outs].ravel()",
        "the source edges from the lowest layer",
    ),
    # -- context mixing (ALTI, value norm, GlobEnc)
    M(
        "mixing-norm-no-sqrt",
        "olas_utils/maths/mixing.py",
        "return _quadratic(weights, heads @ heads.transpose(-1, -2)).clamp_min(0).sqrt()",
        "return _quadratic(weights, heads @ heads.transpose(-1, -2)).clamp_min(0)",
        "squared norms",
    ),
    M(
        "mixing-quadratic-one-weight",
        "olas_utils/maths/mixing.py",
        "return mixed.mul_(weights).sum(1)",
        "return mixed.sum(1)",
        "the quadratic form with one attention weight",
    ),
    M(
        "mixing-alti-no-clamp",
        "olas_utils/maths/mixing.py",
        "return (outputs.abs().sum(-1)[:, :, None] - dist).clamp_min(0)",
        "return outputs.abs().sum(-1)[:, :, None] - dist",
        "ALTI's negative proximities kept",
    ),
    M(
        "mixing-alti-l2",
        "olas_utils/maths/mixing.py",
        "dist = (outputs[:, :, None, :] - vectors).abs().sum(-1)",
        "dist = (outputs[:, :, None, :] - vectors).pow(2).sum(-1)",
        "squared L2 distance instead of L1",
    ),
    M(
        "mixing-globenc-no-centering",
        "olas_utils/maths/mixing.py",
        "return ((vectors - vectors.mean(-1, keepdim=True)) * ffn_gain).norm(dim=-1)",
        "return (vectors * ffn_gain).norm(dim=-1)",
        "GlobEnc without the layer norm's centring",
    ),
    M(
        "mixing-residual-scale",
        "olas_utils/maths/mixing.py",
        "r = r / a_scale[..., None]",
        "r = r",
        "the residual not divided by the attention norm's scale",
    ),
]
del M


def unpack(dest: Path, worktree: bool) -> None:
    """The committed tree (or the tracked and untracked-unignored working files) under ``dest``."""
    if worktree:
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
        for f in filter(None, files):
            src = ROOT / f.decode()
            if src.is_file():
                (dest / f.decode()).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / f.decode())
        return
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True).stdout
    tar = dest / ".head.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(dest, filter="data")
    tar.unlink()


def apply(tree: Path, m: Mutant) -> None:
    path = tree / m.module
    lines = path.read_text().split("\n")
    hits = [i for i, ln in enumerate(lines) if ln.strip() == m.line]
    if len(hits) != 1:
        raise LookupError(f"{m.id}: {len(hits)} lines of {m.module} read {m.line!r} (must be 1)")
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + m.mutated
    path.write_text("\n".join(lines))


def run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[int, float, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(tree))
    env.setdefault("OLAS_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *FAST, *tests]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, out = -1, "timeout"
    lines = [ln for ln in out.strip().split("\n") if ln.strip()]
    return rc, time.monotonic() - t0, lines[-1] if lines else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", nargs="*", default=[], help="only the mutants whose id contains one of these words")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--worktree", action="store_true", help="mutate a copy of the working tree, not of HEAD")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per test run (a timeout counts as killed)")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.k or any(w in m.id for w in args.k)]
    if args.list:
        for m in chosen:
            print(f"{m.id:32s} {m.module:36s} {m.what}")
        return 0
    with tempfile.TemporaryDirectory(prefix="olas-mutation-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        unpack(base, args.worktree)
        modules = sorted({m.module for m in chosen})
        for mod in modules:  # every mutant must find its line, and every test set pass unmutated
            for m in (m for m in chosen if m.module == mod):
                probe = Path(tmp) / "probe"
                shutil.copytree(base / "olas_utils", probe / "olas_utils")
                try:
                    apply(probe, m)
                finally:
                    shutil.rmtree(probe)
            rc, secs, last = run_tests(base, TESTS[mod], args.timeout)
            print(f"unmutated {mod}: rc={rc} {secs:.0f}s {last}", flush=True)
            if rc != 0:
                print(f"the tests of {mod} fail without a mutant: nothing scored", file=sys.stderr)
                return 2
        killed = 0
        print("\n| mutant | module | edit | result | tests |\n|---|---|---|---|---|", flush=True)
        for m in chosen:
            tree = Path(tmp) / m.id
            shutil.copytree(base, tree, symlinks=True)
            apply(tree, m)
            rc, secs, last = run_tests(tree, TESTS[m.module], args.timeout)
            shutil.rmtree(tree)
            dead = rc != 0
            killed += dead
            result = "killed" if dead else "**survived**"
            print(
                f"| {m.id} | {m.module.removeprefix('olas_utils/')} | {m.what} | {result} | {last} ({secs:.0f} s) |",
                flush=True,
            )
        print(f"\nscore: {killed} of {len(chosen)} killed ({100 * killed / max(1, len(chosen)):.0f} %)")
        return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
