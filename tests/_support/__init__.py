"""Helpers shared by several test files (importable as ``tests._support`` or, with ``tests/`` on
``sys.path`` as pytest puts it there for ``conftest.py``, as ``_support``). Test files import
from here, never from each other."""
