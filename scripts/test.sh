#!/usr/bin/env bash
# Set up .venv (if needed), install anchorfs with its test extras, check the layering, run the whole test suite.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" "test,e5,minilm"
# The layering is a contract (.importlinter): one import direction, no module in a circle.
.venv/bin/lint-imports --no-cache
exec .venv/bin/python -m pytest "$@"
