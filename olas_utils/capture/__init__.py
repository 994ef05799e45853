"""Model surgery: what a model is (``architecture``), its attention captured and folded into
the OLA accumulators as it runs (``attention``), and the hooks and per-architecture specs of
the context-mixing baselines (``mixing_hooks``, ``mixing_specs``)."""
