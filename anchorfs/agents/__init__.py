"""agents: where coding agents meet anchorfs. The MCP server (`mcp`, `mcp_results`), the hosts'
files (`hosts`), the agent hooks (`hook_agent`, the session digest in `digest`), git's hooks
(`hook_git`), and `watch`. Kept free of imports itself, so a hook pays only for the module it runs.
"""
