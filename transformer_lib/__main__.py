"""``python -m transformer_lib`` runs nothing: the command line is ``python -m
transformer_tasks``.
"""

import sys

sys.exit(f"the command line is now: python -m transformer_tasks {' '.join(sys.argv[1:])}".rstrip())
