"""``python -m transformer_tasks``: the command line (see :mod:`transformer_tasks.cli`)."""

from .cli import main

raise SystemExit(main())
