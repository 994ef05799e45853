"""The result of an extraction: :class:`OLAMaps`, OLA maps of a list of sentences with
their tokens, words, word ids and provenance; pooling to word level
(:meth:`OLAMaps.to_words`, neutral by default) and saving/loading, with a content hash
checked on load (:meth:`OLAMaps.content_sha256`, :class:`MapsIntegrityError`); a padded
array view (:meth:`OLAMaps.to_numpy`, :meth:`OLAMaps.save_npz`) and heatmaps
(:meth:`OLAMaps.plot`).

Importing this module does no work.
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import torch

from olas_utils import __version__
from olas_utils.align import POOLINGS, pool_to_words
from olas_utils.maths.uniform import neutral_problem, uniform_reference

__all__ = ["OLAMaps", "MapsIntegrityError", "CONTENT_KEY"]

#: The key of the content hash in a saved maps file (beside the fields of :class:`OLAMaps`).
CONTENT_KEY = "content_sha256"

_TENSOR_FIELDS = ("maps", "special", "word_ids")


class MapsIntegrityError(ValueError):
    """A saved maps file does not hold what was written: its content hash differs from the
    recorded one (damaged or edited), or it has none (written before content hashes).

    Attributes:
        path: the file.
        expected: the recorded SHA-256 (None: the file records none).
        actual: the SHA-256 of what was read.
    """

    def __init__(self, message: str, *, path: Path, expected: str | None, actual: str) -> None:
        super().__init__(message)
        self.path, self.expected, self.actual = path, expected, actual


def _tensor_bytes(t: torch.Tensor):
    t = t.detach().cpu().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""


def _describe(t: torch.Tensor) -> list:
    return [str(t.dtype).removeprefix("torch."), list(t.shape)]


def _version_tuple(version: str) -> tuple[int, ...]:
    """``"0.12.3rc1"`` → ``(0, 12, 3)``: the numeric release parts, for ordering versions."""
    import re

    return tuple(int(m.group()) if (m := re.match(r"\d+", part)) else 0 for part in version.split(".")[:3])


@dataclass
class OLAMaps:
    """OLA and baselines for a list of sentences from one model (the model is not held).

    Attributes:
        maps: ``{name: [tensor per sentence]}``, each ``(T_i, T_i)`` at subword level
            (special tokens included, in token order) or ``(W_i, W_i)`` at word level;
            float32 on the CPU.
        special: word level only: ``{name: [(W_i, S_i) tensor]}``, the attention of each
            word to the sentence's S_i special tokens (excluded from ``maps``).
        tokens, words, word_ids: per sentence.
        model_name, num_layers, is_causal, level, capture_path, dtype, library_version:
            provenance.
        pooling: word level only: the pooling rule (``"neutral"`` or ``"clark"``, see
            :func:`~olas_utils.align.pool_to_words`); None at subword level.
        attention: ``"model"`` or ``"uniform"`` (the tokenizer-only control).
        windows: each layer's sliding attention window
            (:func:`olas_utils.capture.architecture.attention_windows`; None entries: full attention),
            used by neutral pooling's reference; None: every layer attends fully (also for maps
            saved before windows were recorded).
    """

    maps: dict[str, list[torch.Tensor]]
    tokens: list[list[str]]
    words: list[list[str]]
    word_ids: list[torch.Tensor]
    model_name: str
    num_layers: int
    is_causal: bool
    level: str
    capture_path: str
    dtype: str
    special: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    library_version: str = __version__
    pooling: str | None = None
    attention: str = "model"
    windows: tuple[int | None, ...] | None = None

    def __getitem__(self, key: str) -> list[torch.Tensor]:
        try:
            return self.maps[key]
        except KeyError:
            raise KeyError(f"{key!r} was not extracted; available: {sorted(self.maps)}") from None

    def __len__(self) -> int:
        return len(self.words)

    def keys(self) -> list[str]:
        """Names of the extracted maps."""
        return list(self.maps)

    def __repr__(self) -> str:
        sizes = [len(self.labels(i)) for i in range(len(self))]
        span = f"{min(sizes)}-{max(sizes)}" if sizes and min(sizes) != max(sizes) else str(max(sizes, default=0))
        unit = "words" if self.level == "word" else "tokens"
        count = f"{len(self)} sentence{'' if len(self) == 1 else 's'}"
        return (
            f"OLAMaps({self.model_name!r}, {count} of {span} {unit}, level={self.level!r}, "
            f"keys={self.keys()}, causal={self.is_causal}, attention={self.attention!r})"
        )

    def to_numpy(self, key: str):
        """One map of every sentence as a zero-padded array, with its mask.

        Returns:
            ``(values, mask)``: ``values`` a float32 ``(B, L, L)`` array, sentence i's map in
            ``values[i, :n_i, :n_i]`` (n_i its tokens, special tokens included, at subword level,
            its words at word level; L the longest) and 0 elsewhere; ``mask`` a bool ``(B, L)``
            array, True on sentence i's first n_i positions (a pair is real where
            ``mask[:, :, None] & mask[:, None, :]``).

        Raises:
            KeyError: if ``key`` was not extracted (the message lists those that were).
        """
        import numpy as np

        per = self[key]
        n = max((m.shape[-1] for m in per), default=0)
        values = np.zeros((len(per), n, n), dtype=np.float32)
        mask = np.zeros((len(per), n), dtype=bool)
        for i, m in enumerate(per):
            k = m.shape[-1]
            values[i, :k, :k] = m.detach().float().cpu().numpy()
            mask[i, :k] = True
        return values, mask

    def save_npz(self, path: str | Path) -> Path:
        """Write every map as a NumPy ``.npz`` archive, for tools that do not read PyTorch files
        (``numpy.load(path)``, no pickle). It holds, for each key (``"ola:2"``), the padded
        ``(B, L, L)`` float32 array of :meth:`to_numpy`; ``"mask"`` ``(B, L)`` bool; ``"labels"``
        ``(B, L)`` str (words or tokens, ``""`` on padding); and ``"model_name"``, ``"level"``
        as 0-d str arrays. Written atomically (folders created); :meth:`save` stays the file
        :meth:`load` reads back.

        Returns:
            ``path`` as a ``Path``.

        Raises:
            ValueError: a key named ``mask``, ``labels``, ``model_name`` or ``level``.
        """
        import numpy as np

        from olas_utils.infra.atomic import write_atomic

        arrays: dict = {}
        for key in self.maps:
            if key in ("mask", "labels", "model_name", "level"):
                raise ValueError(f"cannot write a map named {key!r} to .npz: the name is taken")
            arrays[key], mask = self.to_numpy(key)
        lengths = [len(self.labels(i)) for i in range(len(self))]
        labels = np.full((len(self), max(lengths, default=0)), "", dtype=object)
        for i, n in enumerate(lengths):
            labels[i, :n] = self.labels(i)
        arrays.update(
            mask=np.arange(labels.shape[1])[None, :] < np.array(lengths, dtype=int)[:, None],
            labels=labels.astype(str),
            model_name=np.array(self.model_name),
            level=np.array(self.level),
        )
        return write_atomic(Path(path), lambda fh: np.savez(fh, **arrays), what="OLA maps .npz file")

    def plot(self, key: str, sentence: int | Iterable[int] = 0, *, shared_scale: bool = False, cmap: str = "viridis"):
        """Heatmaps of one map for one or more sentences (query on the y axis, key on the x
        axis, labelled with :meth:`labels`, every k-th label past 40), one panel each, side by side.

        Args:
            key: the map name (``"ola:2"``).
            sentence: a sentence index or several.
            shared_scale: one colour scale, from the smallest to the largest value of all the
                panels, so panels compare by eye; False: each panel on its own range.
            cmap: matplotlib colour map.

        Returns:
            A ``matplotlib.figure.Figure`` (not shown or saved; a notebook displays it).

        Raises:
            KeyError: if ``key`` was not extracted; IndexError: a sentence index out of range.
        """
        from matplotlib.figure import Figure

        idx = [sentence] if isinstance(sentence, int) else list(sentence)
        mats = []
        for i in idx:
            if not -len(self) <= i < len(self):
                raise IndexError(f"sentence {i} out of range: these maps hold {len(self)} sentences")
            mats.append(self[key][i].detach().float().cpu().numpy())
        lo = min(float(m.min()) for m in mats) if shared_scale else None
        hi = max(float(m.max()) for m in mats) if shared_scale else None
        fig = Figure(figsize=(4.2 * len(mats) + 0.8, 4.2), layout="constrained")
        axes = fig.subplots(1, len(mats), squeeze=False)[0]
        for ax, i, m in zip(axes, idx, mats):
            im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi)
            labels = self.labels(i)
            ticks = range(0, len(labels), -(-len(labels) // 40) or 1)  # at most 40 labels an axis
            ax.set_xticks(ticks, [labels[t] for t in ticks], rotation=90, fontsize=7)
            ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=7)
            ax.set_title(f"{self.model_name} {key} sentence {i}", fontsize=9)
            if not shared_scale:
                fig.colorbar(im, ax=ax, shrink=0.8)
        if shared_scale:
            fig.colorbar(im, ax=list(axes), shrink=0.8, label=f"{key} (shared scale)")
        return fig

    def labels(self, i: int) -> list[str]:
        """Axis labels of sentence ``i``: its W_i words at word level, its T_i tokens
        (special tokens included) at subword level.

        Raises:
            IndexError: if ``i`` is not a sentence index.
        """
        return self.words[i] if self.level == "word" else self.tokens[i]

    def stack(self, i: int, keys: Iterable[str]) -> torch.Tensor:
        """Channels of sentence ``i`` for the given map names, stacked.

        Returns:
            ``(C, T_i, T_i)`` float32 tensor (``(C, W_i, W_i)`` at word level), C = number of
            names, in the given order.

        Raises:
            KeyError: if a name was not extracted (the message lists those that were).
        """
        return torch.stack([self[k][i] for k in keys])

    def to_words(self, pooling: str = "neutral") -> "OLAMaps":
        """The same maps pooled to word level (see :func:`~olas_utils.align.pool_to_words`),
        so one subword-level extraction serves every protocol.

        Args:
            pooling: ``"neutral"`` (default: each key divided by its own map under uniform
                attention over the positions each layer sees (``windows``),
                :func:`olas_utils.maths.uniform.uniform_reference`, so tokenisation
                alone leaves no trace) or ``"clark"`` (rows averaged, columns summed;
                confounded across tokenizers).

        Returns:
            A new :class:`OLAMaps` with ``(W_i, W_i)`` maps and ``special`` filled with each
            word's ``(W_i, S_i)`` attention to the special tokens.

        Warns:
            UserWarning: neutral pooling of a key for which it means nothing on this model
                (:func:`olas_utils.maths.uniform.neutral_problem`: ``"alti"`` / ``"globenc"``, the product of
                many causal layers), naming it; its word maps are still returned.

        Raises:
            ValueError: if the maps are already at word level, or on an unknown pooling.
        """
        if self.level == "word":
            raise ValueError("these maps are already at word level")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if pooling == "neutral":
            for key in self.maps:
                why = neutral_problem(key, causal=self.is_causal, num_layers=self.num_layers)
                if why is not None:
                    warnings.warn(f"{self.model_name}: {why}", UserWarning, stacklevel=2)
        maps: dict[str, list] = {k: [] for k in self.maps}
        special: dict[str, list] = {k: [] for k in self.maps}
        for key, per_sentence in self.maps.items():
            for m, wid, words in zip(per_sentence, self.word_ids, self.words):
                ref = None
                if pooling == "neutral":
                    ref = uniform_reference(
                        key, m.shape[-1], causal=self.is_causal, num_layers=self.num_layers, windows=self.windows
                    )
                wm, sp = pool_to_words(m, wid, len(words), pooling=pooling, reference=ref)
                maps[key].append(wm)
                special[key].append(sp)
        return dataclasses.replace(self, maps=maps, special=special, level="word", pooling=pooling)

    def content_sha256(self) -> str:
        """SHA-256 of everything the maps hold: the canonical JSON
        (:func:`olas_utils.infra.fingerprint.canonical_json`) of every field, each tensor replaced
        by its ``[dtype, shape]`` (``["float32", [5, 5]]``), then a newline, then the bytes of
        every tensor as stored (C order): ``maps`` and ``special`` by sorted name, each
        sentence in order, then ``word_ids``. :meth:`save` records it; :meth:`load` checks it.

        Raises:
            TypeError: a field holds a value JSON cannot represent.
        """
        from olas_utils.infra.fingerprint import canonical_json, sha256_chunks

        meta = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _TENSOR_FIELDS}
        meta["maps"] = {k: [_describe(t) for t in v] for k, v in self.maps.items()}
        meta["special"] = {k: [_describe(t) for t in v] for k, v in self.special.items()}
        meta["word_ids"] = [_describe(t) for t in self.word_ids]

        def chunks():
            yield (canonical_json(meta) + "\n").encode("utf-8")
            for group in (self.maps, self.special):
                for k in sorted(group):
                    yield from (_tensor_bytes(t) for t in group[k])
            yield from (_tensor_bytes(t) for t in self.word_ids)

        return sha256_chunks(chunks())

    def save(self, path: str | Path) -> Path:
        """Write the maps and their provenance to ``path`` (``torch.save`` of plain
        containers and their :meth:`content_sha256` under :data:`CONTENT_KEY`; written to a
        temporary file, then renamed; folders created).

        Returns:
            ``path`` as a ``Path``.

        Raises:
            IsADirectoryError: if ``path`` is a folder (give a file name, e.g. ``maps.pt``).
            OSError: if the file cannot be written (nothing is left behind; names the path).
        """
        from olas_utils.infra.atomic import save_atomic

        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(
                f"cannot save OLA maps to {path}: it is a folder; give a file name such as {path / 'maps.pt'}"
            )
        save_atomic({**dataclasses.asdict(self), CONTENT_KEY: self.content_sha256()}, path, what="OLA maps file")
        return path

    @classmethod
    def load(cls, path: str | Path, *, verify: bool = True) -> "OLAMaps":
        """Read maps written by :meth:`save`, checking their content hash.

        Args:
            path: the file.
            verify: check the recorded :meth:`content_sha256` (default). False reads a file
                without a hash (written by OLAS before content hashes) or one edited on
                purpose, with a warning.

        Returns:
            The :class:`OLAMaps` (tensors on the CPU).

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            IsADirectoryError: if ``path`` is a folder.
            MapsIntegrityError: (a ValueError) if the content differs from the recorded hash
                (damaged or edited), or no hash is recorded; names the file and how to make it again.
            ValueError: if the file is not an OLAS maps file (or is damaged), naming it.
        """
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder, not an OLAS maps file; pass the file OLAMaps.save wrote")
        try:
            data = torch.load(path, weights_only=True)
        except (FileNotFoundError, PermissionError):
            raise
        except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError, OSError) as e:
            raise ValueError(
                f"{path} is not an OLAS maps file written by OLAMaps.save, or it is damaged "
                f"({type(e).__name__}); extract the maps again"
            ) from e
        if not isinstance(data, dict) or "maps" not in data or "library_version" not in data:
            raise ValueError(f"{path} is not an OLAS maps file (written by OLAMaps.save)")
        if _version_tuple(str(data["library_version"])) > _version_tuple(__version__):
            raise ValueError(
                f"{path} was written by a newer OLAS ({data['library_version']}) than this one ({__version__}): "
                "upgrade OLAS to read it (pip install -U .)"
            )
        recorded = data.pop(CONTENT_KEY, None)
        try:
            maps = cls(**data)
            actual = maps.content_sha256()
        except (TypeError, AttributeError, RuntimeError) as e:
            raise ValueError(f"{path} is not an OLAS maps file written by OLAMaps.save, or it is damaged ({e})") from e
        if recorded == actual:
            return maps
        redo = (
            "extract the maps again (extract_ola(...).save(path), or `olas extract ... -o FILE`) and delete this file"
        )
        if recorded is None:
            why = f"{path} records no content hash (SHA-256): it was written by OLAS before content hashes"
        else:
            why = (
                f"the OLA maps file {path} does not hold what OLAMaps.save wrote: its content SHA-256 is "
                f"{actual}, the file records {recorded} (damaged or edited after saving)"
            )
        if not verify:
            warnings.warn(f"{why}; read anyway (verify=False)", UserWarning, stacklevel=2)
            return maps
        raise MapsIntegrityError(
            f"{why}; {redo}, or pass verify=False to read it as it is", path=path, expected=recorded, actual=actual
        )
