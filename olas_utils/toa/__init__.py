"""The Transferable OLA Adapter (``docs/method.md#toa-tasks-and-metrics``) and what it is measured with.

In: OLA maps of task sentences (:mod:`olas_utils.toa.taskmaps`, extracted once per model and
control through :mod:`olas_utils.extract`) and the tasks of :mod:`olas_utils.data.tasks`.
Out: trained adapters, predictions and word-level scores.

- ``taskmaps``: OLA of task sentences per model / control, each sentence extracted once
  (stored per sentence by ``mapshards``, so tasks and notebooks with common sentences share it);
- ``features``: maps → adapter input channels with word positions and gold targets (also
  the position-only control's channels and rank-normalised inputs);
- ``adapter``, ``heads``: the axial-attention image model and the token / relation /
  biaffine heads (``TOAModel``);
- ``train``: resumable, deterministic training (early stopping on dev data) and prediction;
- ``fit``: one experiment step (fit, predict, score) and the model-free baselines;
- ``parallel``: several adapters trained side by side on a CPU, one thread each;
- ``decoding``, ``metrics``: tree decoding (Eisner, Chu–Liu/Edmonds) and POS / NER /
  SemEval / UAS-LAS metrics (and the released code's POS count over subwords);
- ``probes``: training-free syntactic probes of word maps (no adapter: what the parser's
  UAS is read against in notebook 03).

Nothing here imports :mod:`olas_utils.similarity` (the two analyses are independent).
"""
