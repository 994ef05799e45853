"""Task heads on top of the adapter's word features (``docs/method.md#adapter``).

All heads take word features ``(B, W, d)`` (the adapter's features gathered at each word's
position, see :class:`TOAModel`) and return logits; losses live with the heads so that the
training loop is the same for every task. Label id ``-100`` is ignored by every loss.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from olas_utils.toa.adapter import AdapterConfig, OLAAdapter

__all__ = ["TokenHead", "RelationHead", "BiaffineHead", "TOAModel", "HEAD_KINDS"]

IGNORE = -100


class TokenHead(nn.Module):
    """Token classification (POS, NER): a linear map per word (the paper's 1×1 convolution).

    Shapes: features ``(B, W, d)`` → logits ``(B, W, n_classes)``.
    """

    def __init__(self, dim: int, n_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(dim, n_classes)

    def forward(self, feats: torch.Tensor, **_) -> torch.Tensor:
        """Logits ``(B, W, n_classes)``."""
        return self.out(self.drop(feats))

    @staticmethod
    def loss(logits: torch.Tensor, batch: dict) -> torch.Tensor:
        """Cross-entropy over words; ``batch["labels"]`` is ``(B, W)`` long."""
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)


class RelationHead(nn.Module):
    """Relation classification (SemEval): mean-pool each entity span, concatenate, linear
    (``docs/method.md#adapter``).

    Shapes: features ``(B, W, d)``, spans ``(B, 2, 2)`` long ``[start, end)`` word indices →
    logits ``(B, n_classes)``.
    """

    def __init__(self, dim: int, n_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(2 * dim, n_classes)

    def forward(self, feats: torch.Tensor, *, spans: torch.Tensor, **_) -> torch.Tensor:
        """Logits ``(B, n_classes)``.

        Raises:
            ValueError: an empty or out-of-range span.
        """
        w = feats.shape[1]
        if (spans[..., 0] >= spans[..., 1]).any() or (spans[..., 0] < 0).any() or (spans[..., 1] > w).any():
            raise ValueError(f"entity spans must be non-empty [start, end) within 0..{w}, got {spans.tolist()}")
        pos = torch.arange(w, device=feats.device)
        pooled = []
        for e in range(2):
            m = ((pos[None] >= spans[:, e, :1]) & (pos[None] < spans[:, e, 1:])).to(feats.dtype)  # (B, W)
            pooled.append((m[..., None] * feats).sum(1) / m.sum(1, keepdim=True))
        return self.out(self.drop(torch.cat(pooled, dim=-1)))

    @staticmethod
    def loss(logits: torch.Tensor, batch: dict) -> torch.Tensor:
        """Cross-entropy; ``batch["labels"]`` is ``(B,)`` long."""
        return F.cross_entropy(logits, batch["labels"], ignore_index=IGNORE)


class _MLP(nn.Sequential):
    def __init__(self, dim: int, out: int, dropout: float) -> None:
        super().__init__(nn.Linear(dim, out), nn.LeakyReLU(0.1), nn.Dropout(dropout))


class BiaffineHead(nn.Module):
    """Biaffine dependency scorer (Dozat & Manning 2017, "Deep Biaffine Attention for Neural
    Dependency Parsing"; ``docs/method.md#adapter``: arc MLP 512, label MLP 128, dropout 0.33).

    A learned ROOT vector is prepended to the W word features, so index 0 is ROOT and word
    i is index i (1-based, as in CoNLL-U heads).

    * arcs: ``s[b, i, j] = a_dep(i)ᵀ U a_head(j) + a_head(j)ᵀ u`` — score of head j for
      dependent i;
    * labels: ``s[b, i, j, r] = l_dep(i)ᵀ U_r l_head(j) + W_r [l_dep(i); l_head(j)] + b_r``.

    Shapes: features ``(B, W, d)`` → ``(arcs (B, W+1, W+1), labels (B, W+1, W+1, R))`` laid
    out ``[dependent, head]`` as :func:`olas_utils.toa.decoding.decode_tree` expects (row 0 unused).
    """

    def __init__(
        self, dim: int, n_labels: int, arc_dim: int = 512, label_dim: int = 128, dropout: float = 0.33
    ) -> None:
        super().__init__()
        self.root = nn.Parameter(torch.randn(dim) * 0.02)
        self.arc_dep, self.arc_head = _MLP(dim, arc_dim, dropout), _MLP(dim, arc_dim, dropout)
        self.lab_dep, self.lab_head = _MLP(dim, label_dim, dropout), _MLP(dim, label_dim, dropout)
        self.arc_u = nn.Parameter(torch.zeros(arc_dim, arc_dim))
        self.arc_b = nn.Parameter(torch.zeros(arc_dim))
        self.lab_u = nn.Parameter(torch.zeros(n_labels, label_dim, label_dim))
        self.lab_w = nn.Linear(2 * label_dim, n_labels)

    def forward(self, feats: torch.Tensor, **_) -> tuple[torch.Tensor, torch.Tensor]:
        """Arc and label scores (see the class docstring)."""
        b = feats.shape[0]
        x = torch.cat([self.root.expand(b, 1, -1), feats], dim=1)  # (B, W+1, d)
        ad, ah = self.arc_dep(x), self.arc_head(x)
        arcs = torch.einsum("bid,de,bje->bij", ad, self.arc_u, ah) + (ah @ self.arc_b)[:, None, :]
        ld, lh = self.lab_dep(x), self.lab_head(x)
        n = x.shape[1]
        bil = torch.einsum("bid,rde,bje->bijr", ld, self.lab_u, lh)
        lin = self.lab_w(torch.cat([ld[:, :, None].expand(-1, -1, n, -1), lh[:, None].expand(-1, n, -1, -1)], -1))
        return arcs, bil + lin

    @staticmethod
    def loss(out: tuple[torch.Tensor, torch.Tensor], batch: dict) -> torch.Tensor:
        """Head cross-entropy per word plus label cross-entropy at the gold head.

        ``batch["heads"]``, ``batch["labels"]``: ``(B, W)`` long (heads 0..W).
        """
        arcs, labels = out
        heads = batch["heads"]
        arc_loss = F.cross_entropy(arcs[:, 1:].flatten(0, 1), heads.flatten())
        gold = labels[:, 1:].gather(2, heads[:, :, None, None].expand(-1, -1, 1, labels.shape[-1])).squeeze(2)
        lab_loss = F.cross_entropy(gold.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)
        return arc_loss + lab_loss


HEAD_KINDS = {"token": TokenHead, "relation": RelationHead, "dependency": BiaffineHead}


class TOAModel(nn.Module):
    """Adapter + task head.

    Args:
        adapter: an :class:`~olas_utils.toa.adapter.AdapterConfig`.
        kind: ``"token"``, ``"relation"`` or ``"dependency"``.
        n_classes: labels of the head.
        head_kwargs: extra arguments of the head (e.g. ``arc_dim`` for the biaffine head).

    Shapes:
        ``forward(images (B, C, L, L), positions (B, W) long, spans=(B, 2, 2))``: positions
        are each word's index on the image axis (``arange(W)`` at word level, the first
        subword at subword level).
    """

    def __init__(self, adapter: AdapterConfig, kind: str, n_classes: int, **head_kwargs) -> None:
        super().__init__()
        if kind not in HEAD_KINDS:
            raise ValueError(f"kind must be one of {sorted(HEAD_KINDS)}, got {kind!r}")
        self.kind = kind
        self.n_classes = n_classes
        self.head_kwargs = dict(head_kwargs)
        self.adapter = OLAAdapter(adapter)
        self.head = HEAD_KINDS[kind](adapter.dim, n_classes, **head_kwargs)

    def forward(self, images: torch.Tensor, positions: torch.Tensor, spans: torch.Tensor | None = None):
        """Head output for a batch (see the heads for shapes)."""
        feats = self.adapter(images)  # (B, L, d)
        words = feats.gather(1, positions[..., None].expand(-1, -1, feats.shape[-1]))
        return self.head(words, spans=spans)

    def loss(self, out, batch: dict) -> torch.Tensor:
        """The head's loss."""
        return self.head.loss(out, batch)

    def save(self, path, **metadata) -> Path:
        """Write the model (architecture, weights and ``metadata``, e.g. the source model,
        channel keys, label names) to ``path`` atomically; returns the path.

        Raises:
            OSError: the file cannot be written (the message names the path).
        """
        from pathlib import Path

        from olas_utils.infra.atomic import save_atomic
        from olas_utils.infra.fingerprint import sha256_tree

        path = Path(path)
        content = {
            "format": "olas-toa-1",
            "adapter": self.adapter.config.to_dict(),
            "kind": self.kind,
            "n_classes": self.n_classes,
            "head_kwargs": self.head_kwargs,
            "state": self.state_dict(),
            "metadata": metadata,
        }
        save_atomic({**content, "content_sha256": sha256_tree(content)}, path, what="TOA model file")
        return path

    @classmethod
    def load(cls, path, map_location="cpu", *, verify: bool = True) -> tuple["TOAModel", dict]:
        """Read a model written by :meth:`save`: ``(model in eval mode, metadata)``, checking
        the SHA-256 of its content that :meth:`save` recorded.

        Args:
            path: the file.
            map_location: where the weights go.
            verify: refuse a file whose content differs from its recorded hash, or that
                records none (written by OLAS before these hashes). False reads it with a warning.

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: the file is not a (readable) saved TOA model, or (``verify``) it is
                damaged or records no content hash.
        """
        try:
            data = torch.load(path, map_location=map_location, weights_only=False)
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - a damaged file gets the documented error
            raise ValueError(f"{path} is not a readable TOA model ({e})") from e
        if not isinstance(data, dict) or data.get("format") != "olas-toa-1":
            raise ValueError(f"{path} is not a TOA model written by TOAModel.save")
        from olas_utils.infra.fingerprint import check_recorded_sha256

        check_recorded_sha256(data, what=f"the TOA model file {path}", verify=verify)
        model = cls(AdapterConfig(**data["adapter"]), data["kind"], data["n_classes"], **data["head_kwargs"])
        model.load_state_dict(data["state"])
        return model.eval(), data["metadata"]
