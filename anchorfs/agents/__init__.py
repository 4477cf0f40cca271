"""agents: where agents meet anchorfs: the MCP server, the hosts' files, the hooks, watch."""
