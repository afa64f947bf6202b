#!/usr/bin/env bash
# Re-executes notebooks in place, top to bottom in a fresh kernel, with the CPU profile
# (`make execute`; the default is every chapter). Their stored outputs are what the book shows
# and what nbval compares in `make test`, so run this after changing a chapter or the package.
#   scripts/execute_notebooks.sh [chapters/NAME.ipynb ...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JUPYTER="$ROOT/.venv/bin/jupyter"
[ -x "$JUPYTER" ] || { echo "execute_notebooks: no .venv; run 'make book' first" >&2; exit 1; }

notebooks=("$@")
[ ${#notebooks[@]} -gt 0 ] || notebooks=(chapters/*.ipynb)

for nb in "${notebooks[@]}"; do
    [ -f "$nb" ] || { echo "execute_notebooks: no such notebook: $nb" >&2; exit 1; }
    start=$(date +%s)
    # Not the CI smoke profile: the stored outputs come from the full CPU run. The kernel starts in
    # chapters/, as on Colab and in Jupyter. No time limit per cell: chapter 11's training cell takes
    # 30 minutes on 2 fast cores and over an hour on slower ones.
    (cd "$(dirname "$nb")" &&
        env -u CI TRANSFORMER_PROFILE=cpu TQDM_DISABLE=1 PYTHONHASHSEED=0 \
            "$JUPYTER" execute --inplace --timeout=-1 "$(basename "$nb")")
    echo "execute_notebooks: $nb ($(($(date +%s) - start)) s)"
done
