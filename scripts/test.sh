#!/usr/bin/env bash
# Set up .venv (if needed), install anchorfs with its test extras, check the layering, run the whole test suite.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" "test,e5,minilm"
# System tools the tests drive: tmux (the screens, tests/cli/test_screens.py), installed only when missing.
if ! command -v tmux >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq tmux; } >&2 || echo "tmux not installed: the screen tests skip" >&2
fi
# The layering is a contract (.importlinter): one import direction, no module in a circle.
.venv/bin/lint-imports --no-cache
exec .venv/bin/python -m pytest "$@"
