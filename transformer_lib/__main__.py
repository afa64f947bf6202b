"""``python -m transformer_lib`` runs nothing: the command line is now ``python -m
transformer_tasks``, the application's.
"""

import sys

sys.exit(f"the command line is now: python -m transformer_tasks {' '.join(sys.argv[1:])}".rstrip())
