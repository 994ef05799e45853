"""How sure a number is: bootstrap intervals and verdicts over items (``uncertainty``) and the
across-models reading whose unit is the model (``across_models``)."""
