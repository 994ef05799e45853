"""Word alignment across tokenizers: tokenise lists of words with a word id per subword,
and pool subword-level maps to word level (neutral pooling by default, the Clark et al.
rule by name: :func:`pool_to_words`).

Every tokenizer cuts words differently (WordPiece, byte-level BPE, SentencePiece), and
adds its own special tokens (``[CLS]``/``[SEP]``, ``<s>``/``</s>``, ``<bos>``). To compare
models we map each subword to the word it came from, using the character offsets that
fast tokenizers return on the text ``" ".join(words)``:

* a subword is assigned to the word whose characters it overlaps (if it overlaps several,
  the first — with space-joined words this only happens for tokenizers that merge across
  spaces);
* a subword that covers only whitespace (SentencePiece's lone ``▁``) belongs to the word
  that follows it;
* special tokens (``special_tokens_mask == 1``) get word id ``-1``; only those the
  tokenizer adds itself: a word that looks like one (``[SEP]``, ``<s>``,
  ``<|endoftext|>``) is tokenised as text (``split_special_tokens=True``);
* a word that receives no subword (an empty string, or characters the tokenizer's
  normaliser deletes) is an error, never a silent shift of the following words.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import torch

__all__ = ["TokenizedBatch", "tokenize_words", "pool_to_words", "SPECIAL", "TRUNCATION", "POOLINGS"]

#: word id of special tokens (BOS, EOS, CLS, SEP, ...).
SPECIAL = -1

#: word-pooling rules of :func:`pool_to_words` (the first is the default).
POOLINGS = ("neutral", "clark")

#: values of ``truncation`` (:func:`tokenize_words`, :func:`olas_utils.extract.extract_ola`).
TRUNCATION = ("error", "warn")


@dataclass
class TokenizedBatch:
    """A right-padded batch of tokenised sentences with word ids.

    Attributes:
        input_ids: ``(batch, T)`` token ids, right-padded.
        attention_mask: ``(batch, T)`` 1 at real tokens, 0 at padding.
        word_ids: ``(batch, T)`` index of the word each token belongs to; ``-1`` for special
            tokens, ``-2`` for padding.
        tokens: per sentence, the token strings (no padding).
        words: per sentence, the input words.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    word_ids: torch.Tensor
    tokens: list[list[str]]
    words: list[list[str]]

    @property
    def lengths(self) -> list[int]:
        """Number of real tokens per sentence."""
        return self.attention_mask.sum(dim=1).tolist()

    def model_inputs(self, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` on ``device``."""
        return {"input_ids": self.input_ids.to(device), "attention_mask": self.attention_mask.to(device)}


def _validate_words(words: Sequence[str], index: int) -> list[str]:
    if isinstance(words, str):
        raise TypeError(f"sentence {index} is a string; pass a list of words (e.g. text.split()), not raw text")
    words = list(words)
    if not words:
        raise ValueError(f"sentence {index} has no words; remove empty sentences before extraction")
    for j, w in enumerate(words):
        if not isinstance(w, str):
            raise TypeError(f"sentence {index}, word {j} is {type(w).__name__}, not str")
        if not w.strip():
            raise ValueError(f"sentence {index}, word {j} is empty or whitespace ({w!r}); drop it from the word list")
    return words


def _word_spans(words: list[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for w in words:
        spans.append((pos, pos + len(w)))
        pos += len(w) + 1
    return spans


def _assign_words(offsets: list[tuple[int, int]], special: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """Word id per token from character offsets (see the module docstring for the rule)."""
    ids: list[int] = []
    pending: list[int] = []  # whitespace-only tokens waiting for the next word
    w = 0
    for t, ((s, e), sp) in enumerate(zip(offsets, special)):
        if sp:
            ids.append(SPECIAL)
            continue
        # advance to the first word whose span ends after the token starts
        while w < len(spans) and spans[w][1] <= s:
            w += 1
        if w < len(spans) and s < spans[w][1] and e > spans[w][0]:
            for p in pending:
                ids[p] = w
            pending.clear()
            ids.append(w)
        else:  # token covers only whitespace (or nothing): attach to the next word
            ids.append(w if w < len(spans) else len(spans) - 1)
            pending.append(t)
    return ids


def _cut_point(word_ids: list[int], n_special: int, max_length: int) -> int:
    """Largest number of leading words whose subwords plus the special tokens fit in
    ``max_length`` tokens (word ids as from :func:`_assign_words`)."""
    budget = max_length - n_special
    counts: dict[int, int] = {}
    for w in word_ids:
        if w != SPECIAL:
            counts[w] = counts.get(w, 0) + 1
    used, keep = 0, 0
    for w in sorted(counts):
        if used + counts[w] > budget:
            break
        used += counts[w]
        keep = w + 1
    return keep


def _encode(tokenizer, texts: list[str]):
    return tokenizer(
        texts,
        add_special_tokens=True,
        split_special_tokens=True,  # a word typed as "[SEP]" or "<s>" is text, not a control token
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_attention_mask=True,
    )


def _too_long_message(i: int, n_tokens: int, max_length: int) -> str:
    return (
        f"sentence {i} has {n_tokens} tokens, more than the model's maximum of {max_length} "
        f"(max_length); split it into shorter sentences, or pass truncation='warn' to cut it at a "
        f"word boundary (with a warning)"
    )


def tokenize_words(
    tokenizer,
    sentences: Sequence[Sequence[str]],
    *,
    max_length: int | None = None,
    truncation: str = "error",
) -> TokenizedBatch:
    """Tokenise sentences given as word lists, with the tokenizer's own special tokens.

    Args:
        tokenizer: a Hugging Face *fast* tokenizer (needs offset mappings).
        sentences: B sentences, each a list of words (non-empty strings).
        max_length: the most tokens (special tokens included) a sentence may have; None
            for no limit.
        truncation: what to do with a sentence longer than ``max_length``:
            ``"error"`` (default; OLAS never truncates silently) raises ``ValueError``
            naming the sentence, its token count and the maximum; ``"warn"`` keeps the
            longest run of leading *whole words* that fits (the cut sentence is
            re-tokenised, so it is exactly the input a user would get by passing the cut
            word list) and issues one ``UserWarning`` naming every cut sentence with the
            words and tokens removed. The returned ``words`` are the cut lists.

    Returns:
        A right-padded :class:`TokenizedBatch` of ``(B, T)`` tensors, ``T`` the longest
        sentence's token count (``<= max_length``).

    Raises:
        TypeError: if a sentence is a plain string or a word is not a string, or the
            tokenizer is not a fast tokenizer.
        ValueError: on an empty sentence, an empty/whitespace word, a word that yields no
            subword (naming it), no sentence at all, an unknown ``truncation``, a sentence longer than
            ``max_length`` with ``truncation="error"``, or (``"warn"``) a sentence whose
            first word alone does not fit.
    """
    if truncation not in TRUNCATION:
        raise ValueError(f"truncation must be 'error' or 'warn', got {truncation!r}")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be a positive number of tokens, got {max_length}")
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(
            f"{type(tokenizer).__name__} is not a fast tokenizer; OLAS needs offset mappings. "
            "Load it with AutoTokenizer.from_pretrained(..., use_fast=True)."
        )
    if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__iter__"):
        raise TypeError(f"sentences must be a list of sentences, each a list of words, got {type(sentences).__name__}")
    sentences = [_validate_words(s, i) for i, s in enumerate(sentences)]
    if not sentences:
        raise ValueError("no sentences given; pass a list of sentences, each a list of words")
    enc = _encode(tokenizer, [" ".join(s) for s in sentences])
    rows = [
        (enc["input_ids"][i], enc["offset_mapping"][i], enc["special_tokens_mask"][i]) for i in range(len(sentences))
    ]
    cuts: list[str] = []
    for i, words in enumerate(sentences):
        ids, offsets, special = rows[i]
        if max_length is None or len(ids) <= max_length:
            continue
        if truncation == "error":
            raise ValueError(_too_long_message(i, len(ids), max_length))
        n_tokens, n_words = len(ids), len(words)
        # cut at a word boundary, re-tokenise the cut text, and shorten further in the rare
        # case a tokenizer merges differently at the new end
        keep = _cut_point(_assign_words(offsets, special, _word_spans(words)), sum(special), max_length)
        while True:
            if keep < 1:
                raise ValueError(
                    f"sentence {i}: its first word alone ({words[0][:40]!r}...) has more tokens than the "
                    f"model's maximum of {max_length}; split that word (truncation='warn' cuts only at "
                    f"word boundaries)"
                )
            cut = _encode(tokenizer, [" ".join(words[:keep])])
            if len(cut["input_ids"][0]) <= max_length:
                break
            keep -= 1
        sentences[i] = words[:keep]
        rows[i] = (cut["input_ids"][0], cut["offset_mapping"][0], cut["special_tokens_mask"][0])
        cuts.append(
            f"sentence {i}: {n_tokens} → {len(rows[i][0])} tokens, kept the first {keep} of {n_words} words "
            f"({n_words - keep} words, {n_tokens - len(rows[i][0])} tokens cut)"
        )
    if cuts:
        shown = "; ".join(cuts[:10]) + (f"; and {len(cuts) - 10} more" if len(cuts) > 10 else "")
        warnings.warn(
            f"{len(cuts)} sentence(s) longer than the model's maximum of {max_length} tokens were cut at a "
            f"word boundary (truncation='warn'): {shown}",
            UserWarning,
            stacklevel=2,
        )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows_ids, rows_words, tokens = [], [], []
    for i, words in enumerate(sentences):
        ids, offsets, special = rows[i]
        wid = _assign_words(offsets, special, _word_spans(words))
        seen = set(wid)
        missing = [j for j in range(len(words)) if j not in seen]
        if missing:
            j = missing[0]
            raise ValueError(
                f"sentence {i}, word {j} ({words[j]!r}) yields no subword with "
                f"{type(tokenizer).__name__} (its normaliser removes it); drop or replace that word"
            )
        rows_ids.append(ids)
        rows_words.append(wid)
        tokens.append(tokenizer.convert_ids_to_tokens(ids))
    t_max = max(len(r) for r in rows_ids)
    b = len(rows_ids)
    input_ids = torch.full((b, t_max), pad_id, dtype=torch.long)
    mask = torch.zeros((b, t_max), dtype=torch.long)
    word_ids = torch.full((b, t_max), -2, dtype=torch.long)
    for i, (ids, wid) in enumerate(zip(rows_ids, rows_words)):
        n = len(ids)
        input_ids[i, :n] = torch.tensor(ids)
        mask[i, :n] = 1
        word_ids[i, :n] = torch.tensor(wid)
    return TokenizedBatch(input_ids, mask, word_ids, tokens, [list(s) for s in sentences])


def pool_to_words(
    maps: torch.Tensor,
    word_ids: torch.Tensor,
    num_words: int,
    *,
    pooling: str = "neutral",
    reference: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pool a subword-level attention-like map of one sentence to word level.

    Two rules (:data:`POOLINGS`):

    ``"clark"``  Clark et al. (2019, *What Does BERT Look At?*, §4.1): for each word,
                 **average its subword rows** (a word's attention distribution is the mean of
                 its subwords') and **sum its subword columns** (attention received by a word
                 is the total received by its subwords). If the subword rows sum to 1, each
                 word row of ``word_map`` plus its row of ``special`` sums to 1. Use it for
                 questions about attention *mass*. It is **confounded across tokenizers**: a
                 word cut into three subwords receives about three times the column mass of
                 a one-subword word whatever the attention, so word maps encode each
                 tokenizer's segmentation (uniform attention alone then retrieves the right
                 chunk across models almost as well as real OLA).
    ``"neutral"`` (default) the Clark-pooled map divided, entry by entry, by the Clark-pooled
                 map that uniform attention gives for the same key and sentence
                 (``reference``, from :func:`olas_utils.maths.uniform.uniform_reference`): the *lift*
                 of the attention over what a model that attends evenly to every visible token
                 would give (0 where uniform attention gives 0: a causal map's future). Under
                 uniform attention every visible entry is exactly 1, for every key (orders,
                 rollout, layers) and every tokenizer, so the word maps carry no information
                 about the sentence or its segmentation beyond the word count; whatever
                 structure a neutral word map shows comes from the model's attention. For
                 one-token words of an encoder's order-1 map it is ``T ×`` the attention.

    Special-token columns are pooled the same way, per special token, and returned
    separately; special-token rows are dropped.

    Args:
        maps: ``(..., T, T)`` subword-level maps of one sentence (``...`` e.g. orders).
        word_ids: ``(T,)`` word id per token (``-1`` special, ``-2`` padding).
        num_words: W, the sentence's number of words.
        pooling: ``"neutral"`` or ``"clark"``.
        reference: ``(T, T)`` (or broadcastable to ``maps``) map of the same key under
            uniform attention; required for ``"neutral"``, unused by ``"clark"``.

    Returns:
        ``(word_map, special)``: ``(..., W, W)`` and ``(..., W, S)`` where S is the number
        of special tokens, in token order.

    Raises:
        ValueError: if a word in ``0..W-1`` has no token, a word id is ``W`` or more (or below
            -2), on an unknown ``pooling``, or if ``"neutral"`` is asked without ``reference``
            (or with one of another size, or one with a row without a positive entry, negative
            or non-finite entries).
        TypeError: ``word_ids`` that are not integers.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if not isinstance(word_ids, torch.Tensor) or word_ids.dim() != 1:
        raise ValueError(f"word_ids must be a (T,) tensor of word ids, got {getattr(word_ids, 'shape', word_ids)!r}")
    if word_ids.is_floating_point() or word_ids.is_complex() or word_ids.dtype == torch.bool:
        raise TypeError(
            f"word_ids must hold whole numbers (an integer tensor: word index, -1 special, -2 padding), got "
            f"{word_ids.dtype}; convert with word_ids.long() if the values are whole"
        )
    if isinstance(num_words, bool) or not isinstance(num_words, int) or num_words < 0:
        raise ValueError(f"num_words must be a whole number >= 0, got {num_words!r}")
    word_ids = word_ids.to(maps.device)
    t = word_ids.shape[0]
    if maps.shape[-1] != t:
        raise ValueError(f"maps have {maps.shape[-1]} tokens but word_ids has {t}")
    if t and int(word_ids.max()) >= num_words:
        raise ValueError(
            f"word_ids name word {int(word_ids.max())} but num_words is {num_words}: pass the sentence's word "
            "count (max word id + 1)"
        )
    if t and int(word_ids.min()) < -2:
        raise ValueError(f"word_ids hold {int(word_ids.min())}: ids are word indices, -1 (special) or -2 (padding)")
    if pooling == "neutral":
        if reference is None:
            raise ValueError(
                "pooling='neutral' divides by the map uniform attention gives for the same key: pass "
                "reference=olas_utils.maths.uniform.uniform_reference(key, T, causal=..., num_layers=...), or use "
                "OLAMaps.to_words(), which does it; pooling='clark' needs no reference"
            )
        if reference.shape[-1] != t or reference.shape[-2] != t:
            raise ValueError(f"reference is {tuple(reference.shape)}, the maps have {t} tokens")
        _check_reference(reference)
    is_word = word_ids >= 0
    onehot = torch.zeros((t, num_words), dtype=maps.dtype, device=maps.device)
    onehot[is_word.nonzero(as_tuple=True)[0], word_ids[is_word]] = 1.0
    counts = onehot.sum(0)
    if (counts == 0).any():
        j = int((counts == 0).nonzero()[0])
        raise ValueError(f"word {j} has no token in word_ids")
    row_pool = (onehot / counts).transpose(0, 1)  # (W, T): mean over the word's rows
    special_cols = (word_ids == SPECIAL).nonzero(as_tuple=True)[0]
    rows = row_pool @ maps
    word_map = rows @ onehot
    special = rows[..., special_cols]
    if pooling == "clark":
        return word_map, special
    ref_rows = row_pool @ reference.to(device=maps.device, dtype=maps.dtype)
    return _lift(word_map, ref_rows @ onehot), _lift(special, ref_rows[..., special_cols])


def _check_reference(reference: torch.Tensor) -> None:
    """A uniform-attention reference has finite, non-negative entries and a positive entry in
    every row (every token attends somewhere); anything else would make the lift meaningless."""
    ref = reference.detach()
    if not torch.isfinite(ref).all():
        raise ValueError(
            "reference has NaN or inf entries: pass olas_utils.maths.uniform.uniform_reference(key, T, ...)"
        )
    if (ref < 0).any():
        raise ValueError("reference has negative entries: pass olas_utils.maths.uniform.uniform_reference(key, T, ...)")
    empty = ~(ref > 0).any(-1)
    if empty.any():
        row = int(empty.reshape(-1, empty.shape[-1]).any(0).nonzero()[0])
        raise ValueError(
            f"reference row {row} is all zero (uniform attention gives every token somewhere to attend), so the "
            "neutral lift would be 0 everywhere in it: pass olas_utils.maths.uniform.uniform_reference(key, T, causal=..., "
            "num_layers=...) for the same key and sentence length"
        )


def _lift(pooled: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``pooled / ref`` where ``ref > 0``, else 0."""
    ref = ref.expand_as(pooled)
    return torch.where(ref > 0, pooled / torch.where(ref > 0, ref, torch.ones_like(ref)), torch.zeros_like(pooled))
