"""The result of an extraction: :class:`OLAMaps`, OLA maps of a list of sentences with
their tokens, words, word ids and provenance; pooling to word level
(:meth:`OLAMaps.to_words`, neutral by default) and saving/loading.

Importing this module does no work.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import torch

from olas_utils import __version__
from olas_utils.align import POOLINGS, pool_to_words
from olas_utils.uniform import uniform_reference

__all__ = ["OLAMaps"]


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
            (:func:`olas_utils.architecture.attention_windows`; None entries: full attention),
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
                :func:`olas_utils.uniform.uniform_reference`, so tokenisation
                alone leaves no trace) or ``"clark"`` (rows averaged, columns summed;
                confounded across tokenizers).

        Returns:
            A new :class:`OLAMaps` with ``(W_i, W_i)`` maps and ``special`` filled with each
            word's ``(W_i, S_i)`` attention to the special tokens.

        Raises:
            ValueError: if the maps are already at word level, or on an unknown pooling.
        """
        if self.level == "word":
            raise ValueError("these maps are already at word level")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
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

    def save(self, path: str | Path) -> Path:
        """Write the maps and their provenance to ``path`` (``torch.save`` of plain
        containers; written to a temporary file, then renamed; folders created).

        Returns:
            ``path`` as a ``Path``.

        Raises:
            IsADirectoryError: if ``path`` is a folder (give a file name, e.g. ``maps.pt``).
            OSError: if the file cannot be written (nothing is left behind; names the path).
        """
        from olas_utils.atomic import save_atomic

        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(
                f"cannot save OLA maps to {path}: it is a folder; give a file name such as {path / 'maps.pt'}"
            )
        save_atomic(dataclasses.asdict(self), path, what="OLA maps file")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "OLAMaps":
        """Read maps written by :meth:`save`.

        Returns:
            The :class:`OLAMaps` (tensors on the CPU).

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            IsADirectoryError: if ``path`` is a folder.
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
        return cls(**data)
