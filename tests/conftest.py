"""Shared fixtures: real zoo models are loaded once per test session."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=None)
def _load(name: str):
    from olas_utils.zoo import load_model

    return load_model(name, device="cpu")


@pytest.fixture(scope="session")
def zoo_model():
    """Callable ``name -> LoadedModel`` (cached for the session)."""
    return _load


def pytest_collection_modifyitems(config, items):
    # keep real-model tests grouped by model to limit memory churn
    items.sort(key=lambda it: 0 if "real_model" not in it.keywords else 1)
