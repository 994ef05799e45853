"""Per-sentence storage of OLA maps on disk: a folder of shards, each an
:class:`~olas_utils.maps.OLAMaps` file of some sentences with a small JSON list of their
sentence ids beside it.

A sentence is identified by its words alone (:func:`sentence_id`), so the same sentence in
two tasks (UD English-EWT and UNER English-EWT list the same sentences in other orders) or
two notebooks is found whatever list it came in, and only sentences never seen are
extracted. One folder holds the maps of one (model, control, settings) combination; the
caller names it. Shards are written atomically, the list after the maps, under names
derived from their content, so two writers never clash and a shard without its list (a
run killed between the two writes) is simply not used.

Importing this module does no work.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Sequence

from olas_utils.atomic import write_json_atomic
from olas_utils.fingerprint import legacy_json, sha256_text

__all__ = ["sentence_id", "MapShards", "DamagedShardError"]


class DamagedShardError(ValueError):
    """A shard's maps file cannot be read; ``name`` is the shard (see :meth:`MapShards.drop`)."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def sentence_id(words: Sequence[str]) -> str:
    """SHA-256 (hex) of a sentence's words (JSON list): equal words, equal id."""
    return sha256_text(legacy_json(list(words), ensure_ascii=False))


class MapShards:
    """The shards in ``folder``.

    Args:
        folder: one folder per (model, control, settings); created on the first write.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def index(self) -> dict[str, tuple[str, int]]:
        """Sentence id → ``(shard name, position in the shard)`` over every complete shard.

        Warns:
            UserWarning: an unreadable list (its shard is ignored and its sentences are
                extracted again).
        """
        out: dict[str, tuple[str, int]] = {}
        if not self.folder.is_dir():
            return out
        for lst in sorted(self.folder.glob("*.json")):
            if not lst.with_suffix(".pt").exists():
                continue
            try:
                ids = json.loads(lst.read_text())["sentences"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                warnings.warn(
                    f"ignoring the unreadable shard list {lst} ({e}); its sentences are extracted again", stacklevel=2
                )
                continue
            for pos, sid in enumerate(ids):
                out.setdefault(sid, (lst.stem, pos))
        return out

    def write(self, maps, ids: Sequence[str]) -> str:
        """Store ``maps`` (an :class:`~olas_utils.maps.OLAMaps`, one entry per id, in order)
        as a new shard; returns its name.

        Raises:
            ValueError: as many ids as sentences are needed.
            OSError: the folder cannot be written (nothing partial is used later).
        """
        if len(ids) != len(maps):
            raise ValueError(f"{len(ids)} sentence ids for {len(maps)} sentences")
        name = sha256_text("".join(ids))[:32]
        self.folder.mkdir(parents=True, exist_ok=True)
        maps.save(self.folder / f"{name}.pt")
        write_json_atomic(self.folder / f"{name}.json", {"sentences": list(ids)}, what="shard list", indent=None)
        return name

    def drop(self, name: str) -> None:
        """Stop using shard ``name`` (its list is renamed ``*.json.bad``; its sentences count
        as missing from then on)."""
        lst = self.folder / f"{name}.json"
        if lst.exists():
            lst.replace(lst.with_name(lst.name + ".bad"))

    def read(self, ids: Sequence[str], index: dict[str, tuple[str, int]] | None = None, *, loaded: dict | None = None):
        """The maps of ``ids`` (all stored), in that order, as one
        :class:`~olas_utils.maps.OLAMaps` (provenance from the first shard read).

        Args:
            ids: sentence ids (:func:`sentence_id`).
            index: from :meth:`index` (read again if None).
            loaded: shard name → maps already in memory (e.g. a shard that could not be
                written); their index entries may point at them.

        Raises:
            KeyError: an id that no shard holds (names how many are missing).
            DamagedShardError: a shard that cannot be read (names it).
            ValueError: shards whose provenance differs (they would not be the same maps).
        """
        import dataclasses

        from olas_utils.maps import OLAMaps

        if not ids:
            raise ValueError("no sentences to read")
        index = self.index() if index is None else index
        missing = [i for i in ids if i not in index]
        if missing:
            raise KeyError(f"{len(missing)} of {len(ids)} sentences are not stored in {self.folder}")
        shards: dict[str, OLAMaps] = dict(loaded or {})
        for sid in ids:
            name = index[sid][0]
            if name not in shards:
                try:
                    shards[name] = OLAMaps.load(self.folder / f"{name}.pt")
                except (OSError, ValueError) as e:
                    raise DamagedShardError(f"the shard {self.folder / name}.pt cannot be read ({e})", name) from e
        shards = {name: shards[name] for name in dict.fromkeys(index[sid][0] for sid in ids)}
        first = next(iter(shards.values()))
        same = (
            "model_name",
            "num_layers",
            "is_causal",
            "level",
            "capture_path",
            "dtype",
            "library_version",
            "pooling",
            "attention",
        )
        for name, m in shards.items():
            if any(getattr(m, f) != getattr(first, f) for f in same) or set(m.maps) != set(first.maps):
                raise ValueError(
                    f"shard {name} in {self.folder} holds other maps than its neighbours; delete the "
                    "folder to extract again"
                )
        picks = [(shards[index[sid][0]], index[sid][1]) for sid in ids]
        return dataclasses.replace(
            first,
            maps={k: [m.maps[k][p] for m, p in picks] for k in first.maps},
            special={k: [m.special[k][p] for m, p in picks] for k in first.special},
            tokens=[m.tokens[p] for m, p in picks],
            words=[m.words[p] for m, p in picks],
            word_ids=[m.word_ids[p] for m, p in picks],
        )
