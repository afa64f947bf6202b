#!/usr/bin/env bash
# Installs what tests/test_browser.py needs, quietly, where it can (called by `make test`):
#   - Debian's chromium, plus a small CJK font so the book's Chinese terms render in screenshots
#     (apt-get, only when run as root on a Debian/Ubuntu machine; never `playwright install`);
#   - node_modules/: the pinned copies of the CDN scripts the pages load (MathJax, RequireJS, the
#     ipywidgets manager; versions in package.json / package-lock.json), served to the browser
#     in place of the CDNs so the test runs offline.
# Never fails: what it cannot install, the browser test reports (a skip, or a failure under CI).
set -uo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup_browser: $*"; }

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if command -v fc-list >/dev/null 2>&1 && [ -z "$(fc-list :lang=zh 2>/dev/null)" ]; then
    missing+=(fonts-wqy-microhei)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${missing[*]} (apt-get, about 20 s)"
        if apt-get update -qq >/dev/null 2>&1 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
            say "installed: ${missing[*]}"
        else
            say "could not install ${missing[*]} with apt-get"
        fi
    else
        say "not installed: ${missing[*]} (sudo apt-get install -y ${missing[*]}); without chromium the browser test is skipped"
    fi
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    if command -v npm >/dev/null 2>&1; then
        say "installing the pinned CDN scripts into node_modules/ (npm ci)"
        npm ci --no-audit --no-fund --loglevel=error >/dev/null || say "npm ci failed; the browser test will be skipped"
    else
        say "npm not found (install Node.js); the browser test will be skipped"
    fi
fi
exit 0
