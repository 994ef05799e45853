"""What a model is, read once (:class:`ModelFacts`), and the one place that decides which map keys
it can have, with the reason for each key it cannot (:meth:`ModelFacts.map_keys`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch

from olas_utils.capture.architecture import attention_windows, capture_path, is_causal_model, num_attention_layers
from olas_utils.capture.mixing_specs import mixing_problem
from olas_utils.maths.uniform import neutral_problem
from olas_utils.vocabulary import KEY_METHODS, MapKey, family_of

__all__ = ["ModelFacts", "KeyDecision", "model_facts"]

#: the context-mixing methods whose availability a model's modules decide.
_MIXING_METHODS = tuple(m for m, spec in KEY_METHODS.items() if spec.mixing)


@dataclass(frozen=True)
class KeyDecision:
    """Which of the asked keys a model can have (:meth:`ModelFacts.map_keys`).

    Attributes:
        kept: the keys it has, canonical names, in the asked order.
        dropped: ``{key: why}`` for each other key, one sentence each.
    """

    kept: list[str]
    dropped: dict[str, str]


@dataclass(frozen=True)
class ModelFacts:
    """A model's facts, read from its modules and config once (:meth:`of`).

    Attributes:
        model_class: the model's class name.
        num_layers: N, attention layers (:func:`~olas_utils.capture.architecture.num_attention_layers`).
        num_heads: attention heads per layer from the config, None if it does not say.
        is_causal: causal self-attention (:func:`~olas_utils.capture.architecture.is_causal_model`).
        windows: each layer's sliding attention window in tokens, None for full attention
            (:func:`~olas_utils.capture.architecture.attention_windows`).
        capture_path: ``"interface"``, ``"hook"`` or ``"output_attentions"``
            (:func:`~olas_utils.capture.architecture.capture_path`).
        mixing: ``{method: why not, or None}`` for ``"valuenorm"``, ``"alti"``, ``"globenc"``
            (:func:`~olas_utils.capture.mixing_specs.mixing_problem`).
    """

    model_class: str
    num_layers: int
    num_heads: int | None
    is_causal: bool
    windows: tuple[int | None, ...]
    capture_path: str
    mixing: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, model: torch.nn.Module) -> "ModelFacts":
        """Read the facts of a ``transformers`` model.

        Raises:
            ValueError: a model without self-attention layers (from ``num_attention_layers``).
        """
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        causal = is_causal_model(model)
        return cls(
            model_class=type(model).__name__,
            num_layers=num_attention_layers(model),
            num_heads=getattr(cfg, "num_attention_heads", None),
            is_causal=causal,
            windows=tuple(attention_windows(model.config, causal=causal)),
            capture_path=capture_path(model),
            mixing={m: mixing_problem(model, [m]) for m in _MIXING_METHODS},
        )

    @property
    def family(self) -> str:
        """``"causal"`` or ``"encoder"``."""
        return family_of(self.is_causal)

    def key_problem(self, key: str, *, level: str = "subword") -> str | None:
        """Why this model cannot have map ``key`` at ``level``, or None if it can.

        The reasons, in this order: a context-mixing method its modules lack (no ``MixingSpec``, a
        capture path without value vectors, GlobEnc on a model that is not post-LN), depth (an
        order above N or a layer outside ``-N..N-1``), and at word level a key whose neutral
        pooling means nothing on a deep causal model
        (:func:`olas_utils.maths.uniform.neutral_problem`). Sliding windows drop no key: the
        capture and the uniform control honour each layer's window.

        Raises:
            ValueError: ``key`` is not a map key, or an unknown level.
        """
        if level not in ("subword", "word"):
            raise ValueError(f"level must be 'subword' or 'word', got {level!r}")
        k = MapKey.parse(key)
        n = self.num_layers
        if k.mixing and self.mixing.get(k.method) is not None:
            return self.mixing[k.method]
        if k.index is not None and (k.method == "ola" or k.mixing) and k.index > n:
            return f"order {k.index} multiplies {k.index} distinct layers and the model has {n}"
        if k.method == "layer" and not -n <= k.index < n:
            return f"layer {k.index} is outside the model's {n} layers ({-n}..{n - 1})"
        if level == "word":
            return neutral_problem(str(k), causal=self.is_causal, num_layers=n)
        return None

    def map_keys(self, keys: Iterable[str], *, level: str = "subword") -> KeyDecision:
        """The asked ``keys`` this model can have at ``level``, and why it cannot have the others
        (:meth:`key_problem`).

        Raises:
            ValueError: a name that is not a map key, or an unknown level.
        """
        kept, dropped = [], {}
        for key in keys:
            name = str(MapKey.parse(key))
            why = self.key_problem(name, level=level)
            if why is None:
                kept.append(name)
            else:
                dropped[name] = why
        return KeyDecision(kept, dropped)

    def require_mixing(self, keys: Iterable[str]) -> None:
        """Refuse, before any work, the context-mixing ``keys`` whose method this model lacks
        (other on-request keys, such as ``"flow"``, pass).

        Raises:
            ValueError: naming the keys, the reason and what to do.
        """
        keys = [str(k) for k in map(MapKey.parse, keys) if k.mixing]
        for method in dict.fromkeys(MapKey.parse(k).method for k in keys):
            why = self.mixing.get(method)
            if why is not None:
                asked = [k for k in keys if MapKey.parse(k).method == method]
                raise ValueError(
                    f"{self.model_class} cannot give the context-mixing key(s) {asked}: {why}. Leave them out for "
                    "this model (olas_utils.studies.depth.mixing_skips names the keys a model lacks)"
                )


def model_facts(model) -> ModelFacts:
    """The facts of a :class:`~olas_utils.zoo.LoadedModel` (its ``facts``, read once) or of a
    ``transformers`` model (read now)."""
    if isinstance(model, torch.nn.Module):
        return ModelFacts.of(model)
    facts = getattr(model, "facts", None)
    return facts if isinstance(facts, ModelFacts) else ModelFacts.of(model.model)
