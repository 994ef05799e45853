"""The method as pure tensor code: order-k OLA and rollout (``ola``), uniform attention
(``uniform``), the context-mixing baselines (``mixing``), attention flow (``flow``), attention
sinks (``sinks``) and the image augmentations (``augment``). Nothing here touches a model."""
