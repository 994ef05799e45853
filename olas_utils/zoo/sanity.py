"""The sanity check that tells trained weights from broken or random ones: next-token loss
on UD English-EWT dev for causal models, a paraphrase-vs-unrelated cosine margin for
encoders (relative to the distance left between unrelated sentences).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from olas_utils.infra import settings
from olas_utils.zoo.folders import MARKER_NAME, verify_folder
from olas_utils.zoo.load import LoadedModel

__all__ = ["CAUSAL_LOSS_BOUNDS", "ENCODER_MARGIN", "TAGGER_AGREEMENT", "SanityReport", "sanity_check"]


#: Causal models pass if the mean next-token loss (nats/token) on the first 50 sentences of
#: UD English-EWT dev lies in this range. Measured (fp32, CPU): smollm2-135m 4.52,
#: gemma3-270m 4.07, qwen2.5-0.5b 4.96; randomly initialised copies 10.9-12.6 (about
#: ln(vocabulary size)); gemma3-270m without its <bos> token 8.3.
CAUSAL_LOSS_BOUNDS = (0.0, 6.0)


#: Encoders pass if the relative paraphrase margin (P - U) / (1 - U) of mean-pooled
#: embeddings is at least this, where P and U are the mean cosines of paraphrase and of
#: unrelated pairs: the share of the cosine distance left between unrelated sentences that
#: paraphrases close. Relative, because e5's cosines all lie high (P 0.90, U 0.70: raw margin
#: 0.19, relative 0.65). Measured: minilm-l6 0.62, mpnet-base 0.60, e5-small 0.65,
#: paraphrase-minilm-l3 0.63, splade-tiny 0.64; randomly initialised copies (seeds 0, 1)
#: 0.04-0.21, where every pair has cosine 0.7-0.97 and the raw margin is under 0.015.
ENCODER_MARGIN = 0.4


#: Taggers (``ZooEntry.sanity == "tagger"``) pass if at least this share of the words of
#: :data:`_TAGGED` get their expected tag from the model's token-classification head.
#: Measured: distilbert-gector 1.00 (15 of 15); its randomly initialised copies tag by chance
#: among 213 tags.
TAGGER_AGREEMENT = 0.9

#: Sentences with each word's expected tag (GECToR's edit tags: ``$KEEP`` leaves a word as it
#: is): one grammar error the model corrects (``docs/models.md#int8-onnx-distilbert``), three correct sentences.
_TAGGED = (
    (("I", "$KEEP"), ("have", "$KEEP"), ("went", "$REPLACE_gone"), ("there", "$KEEP"), ("yesterday", "$KEEP")),
    (("She", "$KEEP"), ("is", "$KEEP"), ("a", "$KEEP"), ("good", "$KEEP"), ("teacher", "$KEEP")),
    (("The", "$KEEP"), ("cat", "$KEEP"), ("sleeps", "$KEEP")),
    (("We", "$KEEP"), ("went", "$KEEP")),
)

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
        metric: ``"next_token_nll"`` (nats/token, causal) or ``"relative_paraphrase_margin"``
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
        return (
            f"{self.name}: {self.metric} = {self.value:.4f} "
            f"(pass if {lo:g} <= value < {hi:g}) -> {'PASS' if self.passed else 'FAIL'}"
        )


def _ud_dev_sentences(data_dir: str | os.PathLike | None, n: int) -> list[str]:
    """The first ``n`` sentence texts of UD English-EWT dev."""
    try:  # the full reader (a datasets.Dataset with a "text" column), where available
        from olas_utils.data import load_ud_ewt  # type: ignore[attr-defined]
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
                out.append(line[len("# text = ") :].rstrip("\n"))
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
        batch = [ids[i] for i in order[b : b + batch_size]]
        width = max(len(x) for x in batch)
        inp = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):  # right padding: positions start at 0 for every row
            inp[r, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, : len(x)] = 1
        labels = inp.masked_fill(mask == 0, -100)
        inp, mask, labels = inp.to(dev), mask.to(dev), labels.to(dev)
        logits = model(input_ids=inp, attention_mask=mask).logits
        logits = logits[:, :-1].float()
        target = labels[:, 1:]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100, reduction="sum"
        )
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


@torch.no_grad()
def _tagger_agreement(loaded: LoadedModel, folder: Path) -> tuple[float, list]:
    """Share of the words of :data:`_TAGGED` whose first piece gets its expected tag from the
    token-classification head stored beside the model (:data:`olas_utils.zoo.formats.TAG_HEAD_FILE`)."""
    from safetensors.torch import load_file

    from olas_utils.zoo.formats import TAG_HEAD_FILE

    head_file = folder / TAG_HEAD_FILE
    if not head_file.is_file():
        raise FileNotFoundError(
            f"{loaded.name}: its tag head {head_file} is missing; prepare the model again "
            f"(python -m olas_utils.zoo prepare {loaded.name} --force)"
        )
    head = load_file(str(head_file))
    weight, bias = head["classifier.weight"], head["classifier.bias"]
    id2label = loaded.config.id2label
    hits, seen = 0, []
    for sentence in _TAGGED:
        words = [w for w, _ in sentence]
        enc = loaded.tokenizer(words, is_split_into_words=True, return_tensors="pt").to(loaded.device)
        hidden = loaded.model(**enc).last_hidden_state[0].float().cpu()
        tags = (hidden @ weight.T + bias).argmax(-1)
        word_ids = enc.word_ids(0)
        for w, (word, expected) in enumerate(sentence):
            got = id2label[int(tags[word_ids.index(w)])]
            hits += got == expected
            seen.append((word, expected, got))
    return hits / len(seen), seen


def sanity_check(
    loaded: LoadedModel, data_dir: str | os.PathLike | None = None, *, n_sentences: int = 50, batch_size: int = 8
) -> SanityReport:
    """Check that a model's weights are real (trained), not broken or random.

    Causal models: mean next-token cross-entropy (nats/token) on the first ``n_sentences``
    sentences of UD English-EWT dev, tokenised with the tokenizer's defaults, batched with
    right padding, labels masked at padding; passes within :data:`CAUSAL_LOSS_BOUNDS`.
    Taggers (``entry.sanity == "tagger"``, e.g. distilbert-gector, not a sentence encoder): the
    share of a few sentences' words that get their expected tag from the token-classification
    head stored beside the model; passes if at least :data:`TAGGER_AGREEMENT`.
    Other encoders: mean-pooled last-layer embeddings; with P, U the mean cosines of paraphrase
    and of unrelated pairs, the relative margin (P - U) / (1 - U); passes if at least
    :data:`ENCODER_MARGIN` (the raw margin P - U is in ``details``). A model loaded from a
    prepared folder (``weights_sha256`` set, a marker in ``loaded.source``) first has every
    file of that folder hashed against its marker (:func:`olas_utils.zoo.folders.verify_folder`).

    Args:
        loaded: a :class:`LoadedModel`.
        data_dir: data folder (see :func:`olas_utils.infra.settings.data_dir`); causal only.
        n_sentences: number of UD sentences (causal).
        batch_size: sentences per forward pass (causal).

    Returns:
        A :class:`SanityReport`.

    Raises:
        FileNotFoundError: if the UD English-EWT dev file is missing (causal).
        DamagedFolderError, UnverifiedFolderError: the prepared folder's files differ from its
            marker, or it records no per-file hashes (the message names the file and the fix).
    """
    t0 = time.perf_counter()
    folder = Path(str(loaded.source))
    if loaded.weights_sha256 and (folder / MARKER_NAME).is_file():
        verify_folder(folder, full=True, name=loaded.entry.name if loaded.entry is not None else None)
    if loaded.is_causal:
        texts = _ud_dev_sentences(data_dir, n_sentences)
        nll, count = _causal_nll(loaded, texts, batch_size)
        lo, hi = CAUSAL_LOSS_BOUNDS
        return SanityReport(
            loaded.name,
            "next_token_nll",
            nll,
            (lo, hi),
            bool(lo <= nll < hi),
            {"sentences": len(texts), "tokens": count, "seconds": round(time.perf_counter() - t0, 2)},
        )
    if loaded.entry is not None and loaded.entry.sanity == "tagger":
        share, seen = _tagger_agreement(loaded, folder)
        return SanityReport(
            loaded.name,
            "tagger_agreement",
            share,
            (TAGGER_AGREEMENT, 1.0 + 1e-9),
            bool(share >= TAGGER_AGREEMENT),
            {
                "words": len(seen),
                "missed": [s for s in seen if s[1] != s[2]],
                "seconds": round(time.perf_counter() - t0, 2),
            },
        )
    a = _embed(loaded, [p[0] for p in _PARAPHRASES + _UNRELATED])
    b = _embed(loaded, [p[1] for p in _PARAPHRASES + _UNRELATED])
    cos = torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).cpu()
    k = len(_PARAPHRASES)
    para, unrel = cos[:k].mean().item(), cos[k:].mean().item()
    margin = (para - unrel) / max(1.0 - unrel, 1e-6)
    lo, hi = ENCODER_MARGIN, 2.0
    return SanityReport(
        loaded.name,
        "relative_paraphrase_margin",
        margin,
        (lo, hi),
        bool(lo <= margin < hi),
        {
            "raw_margin": round(para - unrel, 4),
            "paraphrase_cos": [round(x, 4) for x in cos[:k].tolist()],
            "unrelated_cos": [round(x, 4) for x in cos[k:].tolist()],
            "seconds": round(time.perf_counter() - t0, 2),
        },
    )
