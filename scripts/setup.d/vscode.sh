#!/usr/bin/env bash
# Installs what the VS Code client and its tests need, idempotently:
#   - system packages: chromium (the browser the e2e tests drive), ripgrep (code-server's search),
#     libkrb5-dev (code-server's kerberos module compiles from source here), fonts-dejavu-core (the fonts
#     the e2e screenshot checks pin, so pictures compare across machines);
#   - the extension's own npm dependencies (npm ci in clients/vscode);
#   - a real VS Code 1.100 (code-server 4.100.3), playwright-core and vsce, in the gitignored
#     clients/vscode/.vscode-test/tools. Only the npm registry and Debian's apt are used: downloads
#     from elsewhere (ripgrep's GitHub release, node headers) are pre-seeded or pointed at local copies.
set -euo pipefail
cd "$(dirname "$0")/../.."

CODE_SERVER_VERSION=4.100.3   # VS Code 1.100.3; the newest code-server whose engines.node accepts node 20
PLAYWRIGHT_CORE_VERSION=1.65.1 # drives Chromium 156, the same major as Debian's chromium
VSCE_VERSION=3.9.2             # vsce 4.x needs node 22
RIPGREP_CACHE=vscode-ripgrep-cache-1.15.11

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup vscode: node and npm are needed for the VS Code client; skipping it" >&2
    exit 0
fi

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
[ -e /usr/include/krb5.h ] || [ -e /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup vscode: apt-get install ${missing[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "setup vscode: please install these system packages: ${missing[*]}" >&2
        exit 1
    fi
fi

ext=clients/vscode
node_prefix=$(dirname "$(dirname "$(command -v node)")")
export npm_config_nodedir=$node_prefix npm_config_yes=true npm_config_audit=false npm_config_fund=false

# The extension's dependencies, from its lock file; redone only when the lock file changed.
stamp=$ext/node_modules/.interpreter-lsp-ci-stamp
if [ ! -f "$stamp" ] || [ "$ext/package-lock.json" -nt "$stamp" ]; then
    echo "setup vscode: npm ci in $ext"
    (cd "$ext" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$stamp"
fi

tools=$ext/.vscode-test/tools
if [[ "$(cd "$ext" && pwd -P)" =~ [[:space:]] ]]; then
    # node-gyp cannot build a native module under a path with a space (code-server's argon2: "napi.h: No
    # such file"), and its prebuilt binary is on GitHub, out of reach. The tools then live in the user's
    # cache, and .vscode-test/tools links there.
    real="${XDG_CACHE_HOME:-$HOME/.cache}/interpreter-lsp/vscode-test-tools"
    if [[ "$real" =~ [[:space:]] ]]; then
        echo "setup vscode: this checkout's path and $real both have a space, which the native build of" \
            "code-server's argon2 cannot take: set XDG_CACHE_HOME to a directory without one" >&2
        exit 1
    fi
    mkdir -p "$real" "$ext/.vscode-test"
    if [ ! -L "$tools" ]; then
        rm -rf "$tools"
        ln -s "$real" "$tools"
    fi
fi
want="code-server@$CODE_SERVER_VERSION playwright-core@$PLAYWRIGHT_CORE_VERSION @vscode/vsce@$VSCE_VERSION"
if [ ! -f "$tools/.installed" ] || [ "$(cat "$tools/.installed")" != "$want" ]; then
    echo "setup vscode: installing $want into $tools (about a minute)"
    mkdir -p "$tools/tmp" "$tools/rgpkg"
    tools_abs=$(cd "$tools" && pwd -P)
    # @vscode/ripgrep's postinstall downloads rg from GitHub; seed its cache with Debian's rg instead.
    mkdir -p "$tools_abs/tmp/$RIPGREP_CACHE"
    cp "$(command -v rg)" "$tools_abs/rgpkg/rg"
    tar czf "$tools_abs/tmp/$RIPGREP_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" \
        -C "$tools_abs/rgpkg" rg
    [ -f "$tools/package.json" ] || echo '{"name": "interpreter-lsp-vscode-test-tools", "private": true}' >"$tools/package.json"
    # shellcheck disable=SC2086  # $want is a list of package specs
    (cd "$tools_abs" && TMPDIR="$tools_abs/tmp" npm_config_unsafe_perm=true \
        npm install --no-audit --no-fund --loglevel=error --save-exact $want)
    echo "$want" >"$tools/.installed"
fi
echo "setup vscode: ok (code-server $("$tools/node_modules/.bin/code-server" --version | head -1 | cut -d' ' -f1))"
