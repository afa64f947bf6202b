"""``python -m transformer_lib``: the command line (see :mod:`transformer_lib.cli`)."""

from .cli import main

raise SystemExit(main())
