#!/usr/bin/env bash
# Installs what tests/test_browser.py needs, quietly, where it can (called by `make test`):
#   - Debian's chromium, and WenQuanYi Micro Hei (fonts-wqy-microhei), the CJK font that
#     scripts/make_cjk_font.py takes the site's few glyphs of the Chinese terms from (the site
#     serves them itself: _book_static/fonts/; apt-get, only when run as root on a Debian/Ubuntu
#     machine; never `playwright install`);
#   - node_modules/: the pinned npm packages (package.json / package-lock.json) that the build
#     copies into the site, so that it reads without a network: the scripts the pages load
#     (MathJax, RequireJS, the ipywidgets manager, plotly.js: _ext/local_scripts.py), and
#     onnxruntime-web and @huggingface/tokenizers for chapter 11's translator box (_ext/translator.py).
# With --npm-only (make book) it installs node_modules/ only.
# Never fails: what it cannot install, the browser test reports (a skip, or a failure under CI).
set -uo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup_browser: $*"; }

install_system_packages() {
    local missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    if [ ! -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ]; then
        missing+=(fonts-wqy-microhei)
    fi
    [ ${#missing[@]} -eq 0 ] && return
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
}

[ "${1:-}" = --npm-only ] || install_system_packages

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    if command -v npm >/dev/null 2>&1; then
        say "installing the pinned npm packages into node_modules/ (npm ci)"
        npm ci --no-audit --no-fund --loglevel=error >/dev/null || say "npm ci failed; the browser test will be skipped and the translator box will say its files are missing"
    else
        say "npm not found (install Node.js); the browser test will be skipped and the translator box will say its files are missing"
    fi
fi
exit 0
