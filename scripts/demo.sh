#!/usr/bin/env bash
# Set up .venv (if needed), install anchorfs, and run its main job on a throwaway workspace:
# record anchored memories in a git repo, edit the code, and see the query flag them stale.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" ""
exec .venv/bin/anchorfs demo "$@"
