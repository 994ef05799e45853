"""The logic of notebooks 01–04, one module per notebook, plus the figures and tables they
write. The notebooks only call these functions, so everything they show can be tested.

In: model names, profiles (sizes) and seeds. Out: pandas tables (written by ``tables``
under ``results/``), matplotlib figures (``plots`` and each study's figure functions,
saved under ``figures/``) and Markdown verdicts computed from the run's own numbers.

- ``gallery`` (01): OLA heatmaps of the same sentences across models;
- ``crosslm`` and ``crosslm_report`` (02): cross-LM retrieval and classifier; figures and
  the comparison with the paper;
- ``syntax`` and ``syntax_report`` (03): probes and the biaffine parser per order and seed,
  beside its controls; its tables (intervals, verdicts), figure and closing text;
- ``transfer`` and ``transfer_report`` (04): the adapter across models with three transfer
  remedies, controls and baselines; its tables, figures and verdict;
- ``adapters``: shared by 03 and 04: each (model, sentences, control) extracted once,
  adapter inputs per condition (OLA, tokenizer-only, position-only), training with early
  stopping on dev data;
- ``outcomes``: shared by 03 and 04: the per-sentence outcomes saved beside every table,
  turned into each cell's interval and its margin over a control;
- ``depth``: the orders and keys a model can have (order k needs k layers);
- ``plots``, ``tables``: heatmap primitives (also used by the explorer widget) and the
  CSV + Markdown table writer (and the gzipped per-item outcomes).
"""
