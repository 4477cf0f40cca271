#!/usr/bin/env bash
# Set up .venv (if needed), install anchorfs with its test extras, run the whole test suite.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" "test,e5,minilm"
exec .venv/bin/python -m pytest "$@"
