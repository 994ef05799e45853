"""OLAS: Order-Level Attention analysis across language models.

Importing the package does no work: submodules are loaded when first used.
"""

__version__ = "0.1.0"
