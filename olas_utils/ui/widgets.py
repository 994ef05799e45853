"""An interactive OLA explorer for notebooks (ipywidgets).

Heatmaps of one or two models' order-k OLA or rollout for a typed sentence, from
:func:`olas_utils.extract.extract_ola`, :func:`olas_utils.maths.sinks.preprocess` and
:func:`olas_utils.studies.plots.heatmap`; what it shows and how to test it:
``docs/guide.md#interactive-explorer``.
"""

from __future__ import annotations

import io
import textwrap
import warnings
from collections import OrderedDict
from typing import Any, Callable

import torch

from olas_utils.vocabulary import MapKey, family_of

__all__ = ["OLAExplorer", "NO_MODEL"]

#: Value of the second model's dropdown meaning "no second model".
NO_MODEL = "(none)"


class OLAExplorer:
    """Interactive heatmaps of one or two models' OLA for a typed sentence.

    Args:
        model: zoo name / folder / Hugging Face id shown first.
        compare: a second model shown beside it, or None.
        sentence: initial text; words are separated by whitespace.
        key: ``"ola:k"`` (``1 <= k <= max_order``) or ``"rollout"``.
        remove_sinks: zero attention-sink outliers and renormalise rows
            (:func:`olas_utils.maths.sinks.preprocess`, no symmetrisation).
        level: ``"word"`` or ``"subword"``.
        max_order: highest order offered (each model needs at least that many layers).
        models: names offered in the dropdowns (default the zoo's default models plus
            ``model`` and ``compare``).
        loader: ``name -> LoadedModel`` (default :func:`olas_utils.zoo.load_model` on
            ``device``); called once per name.
        device: device for the default loader (None: CUDA if available, else CPU).
        cell_inches: size of one heatmap.
        cache_size: extractions kept (per model and sentence).
        truncation: a text with more tokens than a model takes
            (:func:`olas_utils.extract.max_tokens`): ``"error"`` (default) shows the error
            and keeps the last figure; ``"warn"`` cuts the text at a word boundary for that
            model (:func:`olas_utils.extract.extract_ola` with ``truncation="warn"``), draws
            the cut text and shows the warning in :attr:`status` and :attr:`warning`.

    Attributes:
        widget: the ``ipywidgets.VBox`` to display.
        model, compare, sentence, key, remove_sinks, level: the control widgets
            (``Dropdown``, ``Dropdown``, ``Text``, ``Dropdown``, ``Checkbox``,
            ``ToggleButtons``).
        status: ``ipywidgets.HTML`` line with what is shown or the last error.
        image: ``ipywidgets.Image`` holding the rendered PNG.
        figure: the matplotlib ``Figure`` last drawn (one axes per model, in order), or
            None before the first successful update.
        current_maps: ``{model name: (query, key) float32 tensor}`` as drawn (words or
            tokens).
        current_labels: ``{model name: n axis labels}`` (words or tokens).
        caption: the text written under the figure (models, order, protocol, sizes).
        error: the last error message, or None if the last update succeeded.
        warning: the truncation warning(s) of the last update, or None.

    Raises:
        ImportError: if ipywidgets is not installed (``pip install ipywidgets``).
        ValueError: on an unknown ``key``, ``level`` or ``truncation``, or ``max_order < 1``.
    """

    def __init__(
        self,
        model: str = "minilm-l6",
        *,
        compare: str | None = None,
        sentence: str = "The quick brown fox jumps over the lazy dog .",
        key: str = "ola:1",
        remove_sinks: bool = True,
        level: str = "word",
        max_order: int = 3,
        models: list[str] | None = None,
        loader: Callable[[str], Any] | None = None,
        device: str | torch.device | None = None,
        cell_inches: float = 4.2,
        cache_size: int = 16,
        truncation: str = "error",
    ) -> None:
        try:
            import ipywidgets as w
        except ImportError as e:  # pragma: no cover - ipywidgets is a dependency
            raise ImportError("the OLA explorer needs ipywidgets: pip install ipywidgets") from e
        if max_order < 1:
            raise ValueError(f"max_order must be >= 1, got {max_order}")
        keys = [(f"order {k}", str(MapKey.ola(k))) for k in range(1, max_order + 1)] + [
            ("rollout", str(MapKey("rollout")))
        ]
        if key not in [v for _, v in keys]:
            raise ValueError(f"key must be one of {[v for _, v in keys]}, got {key!r}")
        if level not in ("word", "subword"):
            raise ValueError(f"level must be 'word' or 'subword', got {level!r}")
        if truncation not in ("error", "warn"):
            raise ValueError(f"truncation must be 'error' or 'warn', got {truncation!r}")
        self.truncation = truncation
        if loader is None:
            from olas_utils.zoo import load_model

            def loader(name: str, _device=device):
                return load_model(name, device=_device)

        if models is None:
            from olas_utils.zoo import DEFAULT_MODELS

            models = list(DEFAULT_MODELS)
        names = list(dict.fromkeys([*models, model] + ([compare] if compare else [])))
        self.max_order = max_order
        self._loader = loader
        self._loaded: dict[str, Any] = {}
        self._cache: OrderedDict[tuple[str, tuple[str, ...]], Any] = OrderedDict()
        self._cache_size = cache_size
        self._cell = cell_inches
        self._hold = False

        self.model = w.Dropdown(options=names, value=model, description="model")
        self.compare = w.Dropdown(options=[NO_MODEL, *names], value=compare or NO_MODEL, description="compare")
        self.sentence = w.Text(
            value=sentence, description="sentence", continuous_update=False, layout=w.Layout(width="95%")
        )
        self.key = w.Dropdown(options=keys, value=key, description="show")
        self.remove_sinks = w.Checkbox(value=remove_sinks, description="remove attention sinks")
        self.level = w.ToggleButtons(
            options=[("words", "word"), ("subwords", "subword")], value=level, description="level"
        )
        self.status = w.HTML()
        self.image = w.Image(format="png")
        self.widget = w.VBox(
            [
                w.HBox([self.model, self.compare]),
                self.sentence,
                w.HBox([self.key, self.remove_sinks]),
                self.level,
                self.status,
                self.image,
            ]
        )
        self.figure = None
        self.current_maps: dict[str, torch.Tensor] = {}
        self.current_labels: dict[str, list[str]] = {}
        self.error: str | None = None
        self.warning: str | None = None
        self.caption = ""
        self._notes: dict[str, str] = {}
        for control in (self.model, self.compare, self.sentence, self.key, self.remove_sinks, self.level):
            control.observe(self.update, names="value")
        self.update()

    # -- computing ---------------------------------------------------------------------------
    def selected_models(self) -> list[str]:
        """Names of the models shown: the first, and the second unless it is none or the same."""
        second = self.compare.value
        return [self.model.value] + ([second] if second not in (NO_MODEL, None, self.model.value) else [])

    def loaded(self, name: str):
        """The :class:`~olas_utils.zoo.LoadedModel` for ``name``, loaded on first use and kept."""
        if name not in self._loaded:
            self._loaded[name] = self._loader(name)
        return self._loaded[name]

    def words(self) -> list[str]:
        """The sentence's words (split on whitespace).

        Raises:
            ValueError: if the sentence has no word.
        """
        words = self.sentence.value.split()
        if not words:
            raise ValueError("the sentence has no words: type a sentence (words separated by spaces)")
        return words

    def maps_for(self, name: str) -> tuple[torch.Tensor, list[str]]:
        """The map drawn for model ``name`` with the current settings.

        Args:
            name: a model name (loaded on first use).

        Returns:
            ``((query, key) float32 tensor, labels)``: words (word level) or tokens, special
            tokens included (subword level); after sink removal if it is on. With
            ``truncation="warn"`` and a text too long for the model, those of the cut text
            (the cut is noted for :attr:`warning`).

        Raises:
            ValueError: on an empty sentence, an order above the model's number of layers,
                or a sentence the tokenizer rejects, or (``truncation="error"``) a text longer
                than the model takes (see :func:`olas_utils.extract.extract_ola`).
        """
        from olas_utils.extract import extract_ola, max_tokens
        from olas_utils.maths.sinks import preprocess

        words = tuple(self.words())
        lm = self.loaded(name)
        cache_key = (name, words)
        res = self._cache.get(cache_key)
        if res is None:
            orders = range(1, min(self.max_order, lm.num_layers) + 1)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sub = extract_ola(
                    lm.model,
                    lm.tokenizer,
                    [list(words)],
                    orders=orders,
                    rollout=True,
                    layers=(),
                    level="subword",
                    progress=False,
                    model_name=name,
                    truncation=self.truncation,
                )
            kept = len(sub.words[0])
            cut = (
                f"the text has more tokens than the model takes ({max_tokens(lm.model, lm.tokenizer)}): "
                f"cut to its first {kept} of {len(words)} words"
                if kept < len(words)
                else ""
            )
            for c in caught:  # the cut is reported in the panel; anything else as usual
                if not (cut and issubclass(c.category, UserWarning) and "truncation='warn'" in str(c.message)):
                    warnings.warn_explicit(c.message, c.category, c.filename, c.lineno)
            res = {"subword": sub, "word": sub.to_words(), "cut": cut}
            self._cache[cache_key] = res
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(cache_key)
        maps = res[self.level.value]
        key = self.key.value
        if key not in maps.maps:
            raise ValueError(f"{name} has {lm.num_layers} layers: {key} is not available (orders 1..{lm.num_layers})")
        m = maps[key][0]
        if res["cut"]:
            self._notes[name] = res["cut"]
        if self.remove_sinks.value:
            m = preprocess(
                m.unsqueeze(0), causal=maps.is_causal, remove_sinks=True, renormalize=True, symmetrize=False
            )[0]
        return m, list(maps.labels(0))

    # -- drawing -----------------------------------------------------------------------------
    def set(self, **values: Any) -> None:
        """Set several controls at once with a single update, e.g.
        ``explorer.set(key="ola:2", level="subword")``.

        Raises:
            ValueError: on a name that is not a control.
        """
        controls = {
            "model": self.model,
            "compare": self.compare,
            "sentence": self.sentence,
            "key": self.key,
            "remove_sinks": self.remove_sinks,
            "level": self.level,
        }
        bad = sorted(set(values) - set(controls))
        if bad:
            raise ValueError(f"unknown control(s) {bad}; use {sorted(controls)}")
        self._hold = True
        try:
            for name, value in values.items():
                controls[name].value = NO_MODEL if (name == "compare" and value is None) else value
        finally:
            self._hold = False
        self.update()

    def update(self, change: Any = None) -> None:
        """Recompute and redraw (the widgets' observer; also callable directly). An error
        (empty sentence, order too high, model that fails to load) is shown in
        :attr:`status` and kept in :attr:`error`; the previous figure stays."""
        if self._hold:
            return
        self._notes = {}
        try:
            maps, labels = {}, {}
            for name in self.selected_models():
                maps[name], labels[name] = self.maps_for(name)
        except Exception as e:  # noqa: BLE001 - shown to the user in the panel
            self.error = f"{type(e).__name__}: {e}"
            self.status.value = f"<span style='color:#b00020'>{_escape(self.error)}</span>"
            return
        self.error = None
        self.warning = " ".join(f"{n}: {msg}" for n, msg in self._notes.items()) or None
        self.current_maps, self.current_labels = maps, labels
        self.caption = self._caption()
        self._draw()
        what = dict((v, k) for k, v in self.key.options)[self.key.value]
        status = (
            f"{what}, {self.level.value} level, "
            f"{'sinks removed' if self.remove_sinks.value else 'with sinks'}: "
            f"{', '.join(f'{n} ({len(labels[n])}×{len(labels[n])})' for n in maps)}"
        )
        if self.warning:
            status += f"<br><span style='color:#8a5a00'>warning: {_escape(self.warning)}</span>"
        self.status.value = status

    def _caption(self) -> str:
        """Models (layers, kind), what is shown, protocol and sizes of the current maps."""
        key = MapKey.parse(self.key.value)
        k = key.order
        what = (
            "attention rollout"
            if key.method == "rollout"
            else "order-1 OLA (the mean of the layers' attention)"
            if k == 1
            else f"order-{k} OLA (the mean over products of {k} distinct layers' attention)"
        )
        models = "; ".join(
            f"{n} ({self.loaded(n).num_layers} layers, {family_of(self.loaded(n).is_causal)}): "
            f"{len(self.current_labels[n])}x{len(self.current_labels[n])}"
            for n in self.current_maps
        )
        level = (
            "word level, neutral pooling (attention / what uniform attention gives; 1 = uniform; "
            "special tokens left out)"
            if self.level.value == "word"
            else "subword level (special tokens included)"
        )
        sinks = (
            "sink outliers (above row mean + 3 sd, and each row's maximum) zeroed, rows renormalised"
            if self.remove_sinks.value
            else "attention sinks kept"
        )
        cut = "".join(f" {n}: {msg}." for n, msg in self._notes.items())
        return f"{what}; {level}; {sinks}. {len(self.words())} words typed. Maps: {models}.{cut}"

    def _draw(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        from olas_utils.studies.plots import heatmap

        n = len(self.current_maps)
        fig = Figure(figsize=(self._cell * n + 1.2 * n, self._cell + 1.0), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, n, squeeze=False)[0]
        what = dict((v, k) for k, v in self.key.options)[self.key.value]
        for ax, (name, m) in zip(axes, self.current_maps.items()):
            heatmap(ax, m, self.current_labels[name], title=f"{name} — {what}", colorbar=True)
        caption = textwrap.fill(self.caption, width=int(fig.get_figwidth() * 15))
        bottom = min(0.45, (0.15 + 0.14 * (caption.count("\n") + 1)) / fig.get_figheight())
        fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))
        fig.text(0.01, 0.01, caption, ha="left", va="bottom", fontsize=7)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90)
        self.figure = fig
        self.image.value = buf.getvalue()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
