"""What :func:`olas_utils.extract.extract_ola` accepts, made one form: a loaded model (a
:class:`~olas_utils.zoo.LoadedModel`, read by its attributes) or a model and its tokenizer, and
sentences as word lists or raw strings.

Raw strings are split into words at whitespace (``str.split()``): the words are the same for
every model (so word-level maps of different tokenizers line up) and, joined by single spaces,
they are the text the tokenizer sees, so the tokens are the tokenizer's own tokens of the text
(runs of whitespace count as one space). Punctuation stays attached to its word
(``"sat."`` is one word); pass word lists to split it off.

Importing this module does no work.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

__all__ = ["ExtractionInputs", "resolve_inputs", "split_words"]


class ExtractionInputs(NamedTuple):
    """The model, tokenizer and word-list sentences of an extraction, and what a loaded model
    says about itself (``name``: its short name; ``attention``: ``"model"`` or ``"uniform"``
    for the tokenizer-only control), None where a bare model was passed."""

    model: Any
    tokenizer: Any
    sentences: Any
    name: str | None
    attention: str | None


def split_words(text: str) -> list[str]:
    """The words of a raw string: split at whitespace (``"The cat sat."`` gives
    ``["The", "cat", "sat."]``); an empty or all-whitespace string gives ``[]``."""
    return text.split()


def _is_loaded(obj) -> bool:
    import torch

    return not isinstance(obj, torch.nn.Module) and hasattr(obj, "model") and hasattr(obj, "tokenizer")


def resolve_inputs(model, tokenizer, sentences) -> ExtractionInputs:
    """Normalise the first three arguments of ``extract_ola``.

    Accepted: ``(loaded, sentences)`` and ``(loaded, sentences=...)`` with a
    :class:`~olas_utils.zoo.LoadedModel` (anything with ``.model`` and ``.tokenizer`` that is not
    itself a ``torch.nn.Module``), or ``(model, tokenizer, sentences)``. Each sentence is a list of
    words or a raw string (:func:`split_words`); other values pass through unchanged, for
    :func:`~olas_utils.align.tokenize_words` to refuse with its own message.

    Raises:
        TypeError: a loaded model with both a tokenizer and sentences, a bare model without a
            tokenizer, sentences missing, or ``sentences`` a single string (pass ``[text]``).
    """
    name = attention = None
    if _is_loaded(model):
        if tokenizer is not None and sentences is not None:
            raise TypeError(
                "extract_ola(loaded_model, sentences): a LoadedModel carries its tokenizer; "
                "pass extract_ola(lm, sentences) or extract_ola(lm.model, lm.tokenizer, sentences)"
            )
        sentences = tokenizer if sentences is None else sentences
        name, attention = getattr(model, "name", None), getattr(model, "attention", None)
        model, tokenizer = model.model, model.tokenizer
    elif tokenizer is None or (sentences is None and isinstance(tokenizer, (list, tuple))):
        from olas_utils.capture.architecture import check_model

        check_model(model)  # a model OLAS cannot read is the first thing to say
        raise TypeError(
            "extract_ola(model, tokenizer, sentences): the tokenizer is missing; pass it, or pass a LoadedModel "
            "(olas_utils.zoo.load_model) as extract_ola(lm, sentences)"
        )
    if sentences is None:
        raise TypeError("extract_ola needs sentences: a list of word lists or of raw strings, e.g. ['The cat sat.']")
    if isinstance(sentences, str):
        raise TypeError(
            f"sentences must be a list of sentences (word lists or raw strings), got one string {sentences[:40]!r}; "
            "pass [text]"
        )
    if isinstance(sentences, Iterable) and not isinstance(sentences, bytes):
        sentences = [split_words(s) if isinstance(s, str) else s for s in sentences]
    return ExtractionInputs(model, tokenizer, sentences, name, attention)
