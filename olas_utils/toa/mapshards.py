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

A shard is used only if it holds what was written for this folder: its list records the
folder's key (the settings hash its caller names it by) and the content SHA-256 of its maps
(:meth:`~olas_utils.maps.OLAMaps.content_sha256`), and its name is derived from its sentence
ids in order. A list whose name does not match its ids (reordered or edited), that records
another key (a shard of another model or settings dropped in) or no hash (written before
content hashes) is set aside with a warning; maps that differ from the hash their list
records raise :class:`DamagedShardError`, which the caller treats the same way. Either way
the shard's sentences are extracted again.

Importing this module does no work.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Sequence

from olas_utils.infra.atomic import write_json_atomic
from olas_utils.infra.fingerprint import legacy_json, sha256_text

__all__ = ["sentence_id", "MapShards", "DamagedShardError"]


class DamagedShardError(ValueError):
    """A shard's maps file cannot be read or differs from what its list records; ``name`` is
    the shard (see :meth:`MapShards.drop`)."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def sentence_id(words: Sequence[str]) -> str:
    """SHA-256 (hex) of a sentence's words (JSON list): equal words, equal id."""
    return sha256_text(legacy_json(list(words), ensure_ascii=False))


def shard_name(ids: Sequence[str]) -> str:
    """The name of the shard of ``ids`` (in that order): the first 32 hex digits of the
    SHA-256 of the ids joined."""
    return sha256_text("".join(ids))[:32]


class MapShards:
    """The shards in ``folder``.

    Args:
        folder: one folder per (model, control, settings); created on the first write.
        key: what the folder holds (e.g. :func:`olas_utils.toa.taskmaps.maps_key`); recorded
            in every shard written and required of every shard read. None: not checked
            (shards of any key are used).
    """

    def __init__(self, folder: str | Path, key: str | None = None) -> None:
        self.folder = Path(folder)
        self.key = key
        self._lists: dict[str, tuple[str, int]] = {}  # shard name -> (maps SHA-256, sentences)

    def _check_list(self, lst: Path) -> list[str]:
        """The sentence ids of the list ``lst``, or a ``ValueError`` saying why it is not used."""
        data = json.loads(lst.read_text())
        ids = data["sentences"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("its sentences are not a list of ids")
        if shard_name(ids) != lst.stem:
            raise ValueError("its sentence ids do not match its name (the list was reordered or edited)")
        if not isinstance(data.get("maps_sha256"), str):
            raise ValueError("it records no content hash (written by OLAS before content hashes)")
        if self.key is not None and data.get("key") != self.key:
            raise ValueError(
                f"it belongs to other maps (key {data.get('key')!r}, this folder's is {self.key!r}: "
                "a shard of another model or settings)"
            )
        self._lists[lst.stem] = (data["maps_sha256"], len(ids))
        return ids

    def index(self) -> dict[str, tuple[str, int]]:
        """Sentence id → ``(shard name, position in the shard)`` over every complete shard
        whose list is intact and belongs to this folder (see the module doc).

        Warns:
            UserWarning: a list that is unreadable, reordered, of another key or without a
                content hash, naming it (it is set aside as ``*.json.bad`` and its sentences
                are extracted again).
        """
        out: dict[str, tuple[str, int]] = {}
        if not self.folder.is_dir():
            return out
        for lst in sorted(self.folder.glob("*.json")):
            if not lst.with_suffix(".pt").exists():
                continue
            try:
                ids = self._check_list(lst)
            except (OSError, ValueError, KeyError, TypeError) as e:
                warnings.warn(
                    f"setting aside the shard list {lst}: {e}; its sentences are extracted again", stacklevel=2
                )
                self.drop(lst.stem)
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
        name = shard_name(ids)
        self.folder.mkdir(parents=True, exist_ok=True)
        maps.save(self.folder / f"{name}.pt")
        digest = maps.content_sha256()
        lst = {"sentences": list(ids), "key": self.key, "maps_sha256": digest}
        write_json_atomic(self.folder / f"{name}.json", lst, what="shard list", indent=None)
        self._lists[name] = (digest, len(ids))
        return name

    def _load(self, name: str):
        """The maps of shard ``name``, checked against its list (:class:`DamagedShardError` if not)."""
        from olas_utils.maps import OLAMaps

        path = self.folder / f"{name}.pt"
        try:
            maps = OLAMaps.load(path)
        except (OSError, ValueError) as e:
            raise DamagedShardError(f"the shard {path} cannot be read ({e})", name) from e
        if name not in self._lists:  # an index made by another MapShards: read the list again
            try:
                self._check_list(self.folder / f"{name}.json")
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise DamagedShardError(f"the shard {path} cannot be used: its list {e}", name) from e
        recorded, n = self._lists[name]
        actual = maps.content_sha256()
        if actual != recorded or len(maps) != n:
            raise DamagedShardError(
                f"the shard {path} holds other maps than its list records ({len(maps)} sentences, content "
                f"SHA-256 {actual}; recorded {n}, {recorded}): a maps file swapped or replaced",
                name,
            )
        return maps

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
            DamagedShardError: a shard that cannot be read, or whose maps differ from the
                content hash its list records or hold another number of sentences (names it).
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
                shards[name] = self._load(name)
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
