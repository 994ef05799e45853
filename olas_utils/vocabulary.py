"""The package's one vocabulary: controls, map keys and model families, each with one type,
one label table and one parser, used by every layer (``docs/method.md#controls``, ``docs/method.md#map-keys``).

* :class:`Control` — what a result is compared with: the trained model itself and its
  controls (tokenizer-only, random weights, shuffled layers, position-only, random-init
  target, model-free baseline). :data:`CONTROL_LABELS` is the one table of every string a
  control is written as (identifiers in caches and in notebook 02's ``control`` column,
  condition names of notebooks 03/04, long labels of 02's text). A new control is one new
  member and one new row.
* :class:`MapKey` — the name of an extracted map (``"ola:2"``, ``"rollout"``,
  ``"layer:-1"``, ``"alti:2"``, ``"valuenorm"``): :meth:`MapKey.parse` / ``str(key)`` are the one
  parser and formatter, and :data:`KEY_METHODS` the one list of methods (a new one such as
  ``flow`` is one new row). Maps are still stored under the string.
* families — ``"encoder"`` / ``"causal"`` (:func:`family_of`).

Importing this module does no work and imports nothing of the package.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass

__all__ = [
    "CAUSAL",
    "CONTROL_LABELS",
    "DEFAULT_BASELINES",
    "ENCODER",
    "FAMILIES",
    "KEY_LABELS",
    "KEY_METHODS",
    "Control",
    "ControlLabels",
    "KeyMethod",
    "MapKey",
    "family_of",
    "key_label",
]


# ---------------------------------------------------------------------------- controls


class Control(enum.Enum):
    """The trained model or one of its controls (``docs/method.md#controls``).

    Every string a control is written as comes from :data:`CONTROL_LABELS` through
    :attr:`ident`, :attr:`condition` and :attr:`label`; :meth:`parse` reads any of them back.
    """

    TRAINED = enum.auto()
    TOKENIZER_ONLY = enum.auto()
    RANDOM_WEIGHTS = enum.auto()
    SHUFFLED_LAYERS = enum.auto()
    POSITION_ONLY = enum.auto()
    RANDOM_INIT_TARGET = enum.auto()
    BASELINE = enum.auto()
    HALF_RANDOM = enum.auto()

    def __repr__(self) -> str:
        return f"Control.{self.name}"

    @property
    def labels(self) -> ControlLabels:
        """This control's row of :data:`CONTROL_LABELS`."""
        return CONTROL_LABELS[self]

    @property
    def ident(self) -> str:
        """The identifier: notebook 02's ``control`` column, model-copy and map-cache names."""
        return self.labels.ident

    @property
    def condition(self) -> str:
        """The condition name of notebooks 03/04 (``condition`` column, adapter inputs)."""
        return self.labels.condition

    @property
    def label(self) -> str:
        """The long label of tables' and figures' text."""
        return self.labels.label

    @property
    def maps(self) -> Control | None:
        """The control whose maps this one reads (None: model-free)."""
        return self.labels.maps

    @property
    def positions(self) -> bool:
        """Whether an adapter of this control reads relative-position channels, not maps."""
        return self.labels.positions

    @property
    def cache_id(self) -> str | None:
        """How a map cache key spells this control: None for the trained model (as every
        cache written so far has it), else :attr:`ident`."""
        return None if self is Control.TRAINED else self.ident

    def copy_suffix(self, seed: int = 0) -> str:
        """What a model copy's name (and derived weight hash) gets appended: ``"+uniform"``
        for the tokenizer-only control (no randomness), else ``"+<ident>(seed=<seed>)"``."""
        if self is Control.TRAINED:
            return ""
        if self is Control.TOKENIZER_ONLY:
            return f"+{self.ident}"
        return f"+{self.ident}(seed={seed})"

    @classmethod
    def parse(cls, value: Control | str) -> Control:
        """A control from itself, its :attr:`ident` or its :attr:`condition`.

        Raises:
            ValueError: on any other value (None included: the trained model is
                :attr:`TRAINED`), naming the accepted ones.
        """
        if isinstance(value, Control):
            return value
        for c, row in CONTROL_LABELS.items():
            if value in (row.ident, row.condition):
                return c
        known = sorted({s for r in CONTROL_LABELS.values() for s in (r.ident, r.condition)})
        raise ValueError(f"unknown control {value!r}; use one of {known}")


@dataclass(frozen=True)
class ControlLabels:
    """One row of :data:`CONTROL_LABELS`.

    Attributes:
        ident: identifier (notebook 02's ``control`` column; model-copy names such as
            ``"<name>+random(seed=0)"``; map caches).
        condition: condition name in notebooks 03/04 (``condition`` column; adapter inputs,
            which feed checkpoint keys).
        label: long label printed in text and figures.
        maps: the control whose maps it reads (None: none, a model-free baseline).
        positions: an adapter of it reads relative-position channels instead of the maps.
    """

    ident: str
    condition: str
    label: str
    maps: Control | None
    positions: bool = False


#: Every string a control is written as, one row per control. These strings end up in
#: tables, cache keys and seeds: changing one changes results.
CONTROL_LABELS: dict[Control, ControlLabels] = {
    Control.TRAINED: ControlLabels("none", "ola", "trained model", Control.TRAINED),
    Control.TOKENIZER_ONLY: ControlLabels(
        "uniform", "tokenizer-only", "tokenizer only (uniform attention)", Control.TOKENIZER_ONLY
    ),
    Control.RANDOM_WEIGHTS: ControlLabels(
        "random", "random-weights", "randomly re-initialised weights", Control.RANDOM_WEIGHTS
    ),
    Control.SHUFFLED_LAYERS: ControlLabels("shuffled", "shuffled-layers", "shuffled layers", Control.SHUFFLED_LAYERS),
    Control.POSITION_ONLY: ControlLabels(
        "position-only", "position-only", "relative positions only", Control.TRAINED, positions=True
    ),
    Control.RANDOM_INIT_TARGET: ControlLabels(
        "random-init target",
        "random-init target",
        "trained adapter on a randomly initialised target",
        Control.RANDOM_WEIGHTS,
    ),
    Control.BASELINE: ControlLabels("baseline", "baseline", "model-free baseline", None),
    Control.HALF_RANDOM: ControlLabels(
        "half-random", "half-random", "half of the layers randomly re-initialised", Control.HALF_RANDOM
    ),
}


# ---------------------------------------------------------------------------- map keys


@dataclass(frozen=True)
class KeyMethod:
    """How a map method takes an index.

    Attributes:
        index: ``"none"`` (``"rollout"``), ``"order"`` (``0..N``: ``"ola:k"``) or
            ``"layer"`` (``-N..N-1``: ``"layer:i"``).
        optional: the index may be left out (``"alti"`` beside ``"alti:k"``).
        bare: for an order method whose index may be left out, what the bare key aggregates
            over the N per-layer matrices ``M(1..N)`` (higher layer on the left):
            ``"rollout"``, ``Π (M(i) + I)`` (unnormalised, like attention rollout), or
            ``"product"``, ``Π M(i)`` (ALTI's aggregation; the residual is already in ``M``).
        mixing: a context-mixing method (:mod:`olas_utils.maths.mixing`): its per-layer matrices
            come from the model's value vectors and hidden states, not from attention alone.
        on_request: extracted only when asked for, through extraction's ``mixing=`` argument
            (:func:`olas_utils.extract.extract_ola`): every context-mixing method, and attention
            flow (:mod:`olas_utils.maths.flow`), which needs every layer of a sentence at once.
    """

    index: str
    optional: bool = False
    bare: str | None = None
    mixing: bool = False
    on_request: bool = False

    def __post_init__(self) -> None:
        if self.bare not in (None, "rollout", "product"):
            raise ValueError(f"bare must be None, 'rollout' or 'product', got {self.bare!r}")
        if self.mixing and not self.on_request:
            raise ValueError("a context-mixing method is extracted on request: pass on_request=True")


#: The map methods a key may name. A new method is one more row; extraction must learn to
#: produce it before it is added. The context-mixing methods
#: (``docs/method.md#context-mixing``): ``"valuenorm:k"`` / ``"alti:k"`` / ``"globenc:k"`` are the
#: order-k decompositions of their row-normalised per-layer matrices (the OLA recurrence),
#: the bare keys their aggregation over all layers. ``"flow"``: attention flow (Abnar & Zuidema
#: 2020, ``docs/method.md#attention-flow``), max-flows through every layer's attention.
KEY_METHODS: dict[str, KeyMethod] = {
    "ola": KeyMethod("order"),
    "rollout": KeyMethod("none"),
    "layer": KeyMethod("layer"),
    "valuenorm": KeyMethod("order", optional=True, bare="rollout", mixing=True, on_request=True),
    "alti": KeyMethod("order", optional=True, bare="product", mixing=True, on_request=True),
    "globenc": KeyMethod("order", optional=True, bare="product", mixing=True, on_request=True),
    "flow": KeyMethod("none", on_request=True),
}


@dataclass(frozen=True)
class MapKey:
    """The name of an extracted map: a method of :data:`KEY_METHODS` and its index.

    ``str(key)`` is the name maps are stored under (``"ola:2"``, ``"rollout"``,
    ``"layer:-1"``); :meth:`parse` reads it back and :meth:`check` bounds the index by a
    model's number of layers.
    """

    method: str
    index: int | None = None

    def __post_init__(self) -> None:
        spec = KEY_METHODS.get(self.method)
        if spec is None:
            raise ValueError(f"unknown map method {self.method!r}; use one of {sorted(KEY_METHODS)}")
        if self.index is None and spec.index != "none" and not spec.optional:
            raise ValueError(f"map method {self.method!r} needs an index ('{self.method}:K')")
        if self.index is not None:
            if spec.index == "none" or isinstance(self.index, bool):
                raise ValueError(f"map method {self.method!r} takes no index {self.index!r}")
            try:
                object.__setattr__(self, "index", operator.index(self.index))  # numpy ints too
            except TypeError:
                raise ValueError(f"map key index {self.index!r} is not an integer") from None
        if self.index is not None and spec.index == "order" and self.index < 0:
            raise ValueError(f"order must be >= 0, got {self.index}")

    def __str__(self) -> str:
        return self.method if self.index is None else f"{self.method}:{self.index}"

    @classmethod
    def parse(cls, key: MapKey | str) -> MapKey:
        """A key from its name (``"ola:2"``, ``"rollout"``, ``"layer:-1"``).

        Raises:
            ValueError: on an unknown method, a missing, extra or non-integer index, or a
                negative order.
        """
        if isinstance(key, MapKey):
            return key
        if not isinstance(key, str):
            # ValueError, not TypeError: parse_key and its callers catch one error type
            raise ValueError(f"a map key is a string such as 'ola:2', not {key!r}")  # noqa: TRY004
        method, sep, idx = key.partition(":")
        if not sep:
            return cls(method)
        body = idx.removeprefix("-")
        if not (body.isdigit() and body.isascii()):
            raise ValueError(f"map key {key!r}: the index {idx!r} is not an integer")
        return cls(method, int(idx))

    @classmethod
    def ola(cls, order: int) -> MapKey:
        """The order-``order`` OLA key (``"ola:k"``)."""
        return cls("ola", order)

    @classmethod
    def layer(cls, index: int) -> MapKey:
        """One layer's head-averaged attention (``"layer:i"``; ``-1`` is the last)."""
        return cls("layer", index)

    @property
    def order(self) -> int | None:
        """The OLA order of an ``"ola:k"`` key, else None."""
        return self.index if self.method == "ola" else None

    @property
    def mixing(self) -> bool:
        """Whether this key names a context-mixing map (``"alti:2"``, ``"valuenorm"``, ...)."""
        return KEY_METHODS[self.method].mixing

    @property
    def on_request(self) -> bool:
        """Whether this key is extracted only when asked for (extraction's ``mixing=`` argument):
        a context-mixing map or attention flow (``"flow"``)."""
        return KEY_METHODS[self.method].on_request

    def check(self, num_layers: int) -> MapKey:
        """This key, if a model of ``num_layers`` layers has it.

        Raises:
            ValueError: an order above ``num_layers`` or a layer outside ``-N..N-1``.
        """
        kind = KEY_METHODS[self.method].index
        if self.index is None:
            return self
        if kind == "order" and self.index > num_layers:
            raise ValueError(f"order {self.index} exceeds the model's {num_layers} layers")
        if kind == "layer" and not -num_layers <= self.index < num_layers:
            raise ValueError(f"layer index {self.index} is outside {-num_layers}..{num_layers - 1}")
        return self


#: The baselines extracted beside the OLA orders unless asked otherwise (notebook 02, the
#: image cache, ``-m olas_utils.similarity.distributed``): rollout, first and last layer.
DEFAULT_BASELINES: tuple[str, ...] = ("rollout", "layer:0", "layer:-1")

#: Display names of map keys in tables and figures (others are shown as their name).
KEY_LABELS: dict[str, str] = {
    "ola:1": "OLA order 1 (= per-layer mean attention)",
    "ola:2": "OLA order 2",
    "ola:3": "OLA order 3",
    "rollout": "attention rollout",
    "layer:0": "first-layer attention",
    "layer:-1": "last-layer attention",
    "valuenorm": "value-norm rollout (Kobayashi et al. 2020)",
    "valuenorm:1": "value-norm order 1 (= per-layer mean value norms)",
    "valuenorm:2": "value-norm order 2",
    "valuenorm:3": "value-norm order 3",
    "alti": "ALTI (Ferrando et al. 2022)",
    "alti:1": "ALTI order 1 (= per-layer mean contributions)",
    "alti:2": "ALTI order 2",
    "alti:3": "ALTI order 3",
    "globenc": "GlobEnc (Modarressi et al. 2022)",
    "globenc:1": "GlobEnc order 1 (= per-layer mean attributions)",
    "globenc:2": "GlobEnc order 2",
    "globenc:3": "GlobEnc order 3",
    "flow": "attention flow (Abnar & Zuidema 2020)",
}


def key_label(key: MapKey | str) -> str:
    """Human-readable name of a map key (``"ola:2"`` → ``"OLA order 2"``)."""
    return KEY_LABELS.get(str(key), str(key))


# ---------------------------------------------------------------------------- families

#: The two model families, as tables write them.
ENCODER, CAUSAL = "encoder", "causal"
#: Families in display order (encoders first).
FAMILIES: tuple[str, str] = (ENCODER, CAUSAL)


def family_of(is_causal: bool) -> str:
    """A model's family from its causality (read from its config): ``"causal"`` or ``"encoder"``."""
    return CAUSAL if is_causal else ENCODER
