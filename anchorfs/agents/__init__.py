"""agents: where coding agents meet anchorfs. The MCP server (`mcp`, its arguments and results
in `mcp_args`, `mcp_results`), the hosts' files (`hosts`: Claude Code, Cursor, VS Code, Codex),
the agent hooks (`hook_agent`, the session digest in `digest`), git's hooks (`hook_git`), and
`watch`. Imports the SDK and what is below it; kept free of imports itself, so a hook pays only
for the module it runs.

Public names: `hook.install`, `hook.agent_main`, `hook.commit_main`, `mcp.build_server`,
`mcp.serve`, `hosts.setup`, `watch.watch`, `watch.record_transitions`.
"""
