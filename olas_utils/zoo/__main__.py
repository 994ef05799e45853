"""Entry point of ``python -m olas_utils.zoo {prepare,list,sanity} ...``: runs
:func:`olas_utils.zoo.cli.main` and exits with its code (the Makefile runs ``prepare``).
"""

import sys

from olas_utils.zoo.cli import main

if __name__ == "__main__":
    sys.exit(main())
