"""Task-split helpers shared by the task-map tests."""

from __future__ import annotations

from dataclasses import replace


def subset(data, idx):
    """The sentences ``idx`` of a :class:`~olas_utils.data.tasks.TaskData`, every per-sentence field picked alike."""
    pick = lambda v: None if v is None else [v[i] for i in idx]  # noqa: E731
    return replace(
        data,
        words=pick(data.words),
        labels=pick(data.labels),
        rows=pick(data.rows),
        heads=pick(data.heads),
        upos=pick(data.upos),
        spans=pick(data.spans),
    )
