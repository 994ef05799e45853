"""Notebook profiles are frozen dataclasses, overridable with dataclasses.replace, read as
attributes by the notebooks; their keys and controls are of the core vocabulary."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from olas_utils.infra.settings import project_root
from olas_utils.studies import crosslm, gallery, profiles, syntax, transfer
from olas_utils.vocabulary import Control, MapKey
from olas_utils.zoo.controls import CONTROLS


def _profiles_doc() -> str:
    return (project_root() / "docs" / "profiles.md").read_text()


TYPES = {
    gallery: profiles.GalleryProfile,
    crosslm: profiles.CrossLMProfile,
    syntax: profiles.SyntaxProfile,
    transfer: profiles.TransferProfile,
}


@pytest.mark.parametrize("module", list(TYPES), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_profiles_are_frozen_and_replaceable(module):
    assert module.PROFILES and {"smoke", "quick", "paper"} <= set(module.PROFILES)
    for name, p in module.PROFILES.items():
        assert type(p) is TYPES[module], name
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.models = ("x",)
        q = dataclasses.replace(p, models=("minilm-l6",))
        assert q.models == ("minilm-l6",) and p.models != ("minilm-l6",) and q != p
        for f in dataclasses.fields(p):
            assert not isinstance(getattr(p, f.name), (list, dict, set)), (name, f.name)  # immutable all the way


def test_profile_keys_parse_and_controls_are_model_copies():
    for module in (syntax, transfer):
        for p in module.PROFILES.values():
            assert [str(MapKey.parse(k)) for k in p.keys] == list(p.keys)
    for p in crosslm.PROFILES.values():
        assert all(MapKey.parse(k).method in ("rollout", "layer") or MapKey.parse(k).on_request for k in p.baselines)
        assert [str(MapKey.parse(k)) for k in p.baselines] == list(p.baselines)
        for c in p.controls + (p.classifier.controls if p.classifier else ()):
            assert isinstance(c, Control) and c in CONTROLS
        if p.classifier:
            assert [str(MapKey.parse(k)) for k in p.classifier.keys] == list(p.classifier.keys)


def test_context_mixing_keys_are_in_the_paper_smoke_and_mixing_profiles_only():
    """ALTI and value-norm cost about 2.6x the OLA extraction: not in the quick profiles' budget; the
    ``mixing`` profiles are quick with them: notebook 03's with the order-1 mixing keys beside OLA order 1
    and rollout, notebook 02's with the paper profile's mixing keys on half of quick's chunks."""
    mixing = lambda keys: [k for k in keys if MapKey.parse(k).mixing]  # noqa: E731
    assert mixing(crosslm.PROFILES["paper"].baselines) == ["alti", "valuenorm", "alti:1"]
    assert {"alti", "alti:1"} <= set(crosslm.PROFILES["paper"].classifier.keys)
    assert mixing(crosslm.PROFILES["smoke"].baselines) == ["alti"]
    assert mixing(syntax.PROFILES["paper"].keys) == ["alti:1"] and mixing(syntax.PROFILES["smoke"].keys) == ["alti"]
    assert not mixing(crosslm.PROFILES["quick"].baselines) and not mixing(syntax.PROFILES["quick"].keys)
    assert not mixing(crosslm.PROFILES["gemma"].baselines)
    assert not any(mixing(p.keys) for p in transfer.PROFILES.values())
    m, q = syntax.PROFILES["mixing"], syntax.PROFILES["quick"]
    assert m.keys == ("ola:1", "rollout", "alti:1", "valuenorm:1") and dataclasses.replace(m, keys=q.keys) == q
    m, q = crosslm.PROFILES["mixing"], crosslm.PROFILES["quick"]
    assert mixing(m.baselines) == ["alti", "valuenorm", "alti:1"] and mixing(m.classifier.keys) == mixing(m.baselines)
    assert f"on {m.n_chunks} chunks (half of quick's" in _profiles_doc().replace("\n", " ")
    assert m.n_chunks == q.n_chunks // 2 and m.controls == q.controls and m.classifier.controls == q.classifier.controls
    assert dataclasses.replace(m, n_chunks=q.n_chunks, baselines=q.baselines, classifier=q.classifier) == q


def test_notebook_02s_flow_profile_is_quick_with_attention_flow_on_shorter_chunks():
    """Attention flow beside OLA and rollout with quick's models, protocols and controls (retrieval and
    classifier); the cut is in chunk length (20 words, not the paper's 50), which every other profile keeps."""
    f, q = crosslm.PROFILES["flow"], crosslm.PROFILES["quick"]
    assert f.baselines == ("rollout", "flow") and f.classifier.keys == ("ola:1", "rollout", "flow")
    # its sizes as docs/profiles.md states them (which the flow profile's run times there were measured at)
    assert f.chunk_words < q.chunk_words and f"{f.n_chunks} chunks of {f.chunk_words} words" in _profiles_doc()
    assert f.models == q.models and f.controls == q.controls and f.classifier.controls == q.classifier.controls
    assert (
        dataclasses.replace(f, n_chunks=q.n_chunks, chunk_words=50, baselines=q.baselines, classifier=q.classifier) == q
    )
    assert all(p.chunk_words == 50 for name, p in crosslm.PROFILES.items() if name != "flow")


def test_the_gemma_profile_is_quick_on_every_offline_model():
    """Notebook 02's ``gemma`` profile changes only the models: the same cached images as quick for the
    default zoo, plus the optional models: one lineage (Gemma 3) as an encoder and as a decoder, two
    Qwen2.5 decoders."""
    from olas_utils.zoo.registry import DEFAULT_MODELS, REGISTRY, same_lineage

    g, q = crosslm.PROFILES["gemma"], crosslm.PROFILES["quick"]
    # every offline model of the zoo (issue 43, item 4): 7 encoders, 4 causal models
    assert g.models == (*DEFAULT_MODELS, "embeddinggemma-300m", "qwen2.5-1.5b") and q.models is None
    assert set(g.models) == set(REGISTRY)
    assert [sum(REGISTRY[m].family == f for m in g.models) for f in ("encoder", "causal")] == [7, 4]
    assert dataclasses.replace(g, models=None) == q
    assert REGISTRY["embeddinggemma-300m"].family != REGISTRY["gemma3-270m"].family
    assert same_lineage("embeddinggemma-300m", "gemma3-270m")


def test_notebooks_03_and_04_share_the_quick_settings_but_03_stops_by_the_rule_chosen_on_dev():
    s, t = syntax.PROFILES["quick"], transfer.PROFILES["quick"]
    # the same settings but the stopping rule: 03's parsers stop by patience 4 with a 0.5-point
    # dev-UAS gain (benchmarks/early_stopping.py), 04's adapters by patience 2 with any gain
    # (their committed runs); wide keeps 04's settings with three seeds
    assert (s.training.patience, s.training.min_gain, t.training.patience, t.training.min_gain) == (4, 0.005, 2, 0)
    assert dataclasses.replace(t.training, seeds=s.training.seeds, patience=4, min_gain=0.005) == s.training
    for name in ("mixing", "flow"):  # quick's parsers with other keys
        assert syntax.PROFILES[name].training == s.training
    assert set(t.training.seeds) <= set(s.training.seeds) and s.sizes == t.sizes and s.level == t.level
    w = transfer.PROFILES["wide"].training
    assert dataclasses.replace(t.training, seeds=w.seeds) == w and set(w.seeds) <= set(t.training.seeds)
    assert s.training.lr == 3e-3 and s.sizes.min_words == 3
    # converged, not capped: the plateau schedule with early stopping and a cap far above the
    # 11-18 epochs the converged runs of benchmarks/adapter_variants.py needed
    assert s.training.schedule == "plateau" and s.training.epochs >= 30 and s.training.min_epochs < s.training.epochs
    assert syntax.PROFILES["smoke"].sizes.min_words == 2  # the default the notebooks used before profiles were typed


def test_trained_learners_of_quick_and_wide_run_with_three_fixed_seeds_or_more():
    from olas_utils.stats.across_models import min_p

    # the quick parsers and adapters: enough seeds for an across-seeds test at 5 % (an exact sign flip over 6)
    for p in (syntax.PROFILES["quick"], transfer.PROFILES["quick"]):
        assert min_p(len(p.training.seeds)) <= 0.05 < min_p(5)
    # 04's: enough for Holm over its summary's (task, target) cells, and no more (2/2**8 <= 0.05/4 < 2/2**7)
    q = transfer.PROFILES["quick"]
    cells = len(q.models) * len(q.tasks)
    assert min_p(len(q.training.seeds)) <= 0.05 / cells < min_p(len(q.training.seeds) - 1)
    # 03's: enough for Holm over its order table's cells (each model's 5 comparisons of ola:1-3 and
    # rollout), and no more (2/2**9 <= 0.05/10 < 2/2**8)
    s = syntax.PROFILES["quick"]
    assert s.keys == ("ola:1", "ola:2", "ola:3", "rollout")  # per model: 1-2, 2-3 and each order - rollout
    cells = len(s.models) * 5
    assert min_p(len(s.training.seeds)) <= 0.05 / cells < min_p(len(s.training.seeds) - 1)
    for p in (syntax.PROFILES["quick"], *(transfer.PROFILES[n] for n in ("quick", "wide", "tagging"))):
        assert len(p.training.seeds) >= 3 and p.training.seeds[0] == 0  # seed 0: the single-seed run of before
    for module in (syntax, transfer):
        assert len(module.PROFILES["smoke"].training.seeds) >= 1


def test_the_tagging_profile_measures_pos_and_ner_across_lineages_with_quicks_settings_and_controls():
    from olas_utils.zoo.registry import same_lineage

    t, q = transfer.PROFILES["tagging"], transfer.PROFILES["quick"]
    assert set(t.tasks) == {"pos", "ner-conll2003"}
    assert t.sizes == q.sizes and t.keys == q.keys and t.level == q.level
    assert t.training == dataclasses.replace(q.training, seeds=t.training.seeds) and len(t.training.seeds) == 3
    assert t.input_controls == transfer.PROFILES["wide"].input_controls and t.variants == q.variants
    pairs = [(a, b) for a in t.models for b in t.models if a < b]
    assert any(same_lineage(a, b) for a, b in pairs) and any(same_lineage(a, b) is False for a, b in pairs)


def test_the_wide_profile_covers_every_encoder_and_causal_model_of_the_default_zoo():
    """Issue 26 item 4: transfer on every lineage of the default zoo, with quick's settings and
    controls on fewer, shorter sentences, and at least four lineages among the encoders."""
    from olas_utils.zoo.registry import DEFAULT_MODELS, REGISTRY, lineage_of

    w, q = transfer.PROFILES["wide"], transfer.PROFILES["quick"]
    assert set(w.models) == set(DEFAULT_MODELS) and len(w.models) == len(DEFAULT_MODELS)
    assert set(q.models) <= set(w.models) and set(w.tasks) == {"dependency", "relation"}
    assert (
        w.training == dataclasses.replace(q.training, seeds=w.training.seeds)
        and w.keys == q.keys
        and w.level == q.level
    )
    assert w.input_controls == q.input_controls
    assert w.sizes == transfer.WIDE_SIZES and w.sizes.n_train < q.sizes.n_train
    assert w.sizes.max_words <= q.sizes.max_words and w.sizes.min_words == q.sizes.min_words
    encoders = [m for m in w.models if REGISTRY[m].family == "encoder"]
    assert len(encoders) == 6 and len({lineage_of(m) for m in encoders}) >= 4


def test_nested_settings_are_replaced_alone():
    p = transfer.PROFILES["smoke"]
    q = dataclasses.replace(p, training=dataclasses.replace(p.training, epochs=1))
    assert q.training.epochs == 1 and p.training.epochs == 2 and q.sizes is p.sizes


def test_notebooks_read_profiles_as_attributes():
    for book in sorted((project_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(book.read_text(encoding="utf-8"))["cells"]
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert re.search(r"\w+\.PROFILES\[profile\]", code), book.name
        assert not re.search(r"cfg\[|cfg\.get\(|dict\(\w+\.PROFILES", code), book.name


def test_transfer_variants_are_checked_and_ordered():
    """A profile's transfer variants are names of ``VARIANTS`` with "plain", kept in ``VARIANTS``' order."""
    from dataclasses import replace

    from olas_utils.studies import transfer

    smoke = transfer.PROFILES["smoke"]
    assert smoke.variants == tuple(transfer.VARIANTS)
    assert replace(smoke, variants=("augmented", "plain")).variants == ("plain", "augmented")
    for bad in (("rank",), ("plain", "plain"), ("plain", "mixup")):
        with pytest.raises(ValueError, match="variants"):
            replace(smoke, variants=bad)


def test_the_paper_size_profile_is_retrieval_on_the_causal_family_at_the_papers_test_size():
    """Issue 43, item 6: 1,000 chunks of 50 words (the paper's test size), the default zoo's causal family
    (every causal model of the default zoo, none other), quick's protocols and every control, OLA orders
    1-3, no classifier; the notebook and the dry run take a profile without one."""
    from olas_utils.zoo.registry import DEFAULT_MODELS, REGISTRY

    p, q = crosslm.PROFILES["paper-size"], crosslm.PROFILES["quick"]
    assert (p.n_chunks, p.chunk_words) == (1000, 50)
    assert p.models == tuple(m for m in DEFAULT_MODELS if REGISTRY[m].family == "causal") and len(p.models) == 3
    assert set(p.controls) == set(CONTROLS) == set(q.controls)
    assert p.protocols == q.protocols == ("released", "paper", "word") and p.orders == (1, 2, 3)
    assert p.classifier is None and p.baselines == ()
    assert profiles.dry_run(p).classifier is None and profiles.dry_run(p).n_chunks < p.n_chunks
