"""How an agent host starts this server: the `mcpServers` entry of a workspace (`mcp_config`)
and the host's config file written with it (`write_mcp_config`, through `anchorfs.agents.hosts`)."""

import os
import shutil
import sys
from pathlib import Path
from typing import Any

__all__ = ["MCP_CONFIG_FILE", "mcp_config", "write_mcp_config"]

MCP_CONFIG_FILE = ".mcp.json"


def _command() -> list[str]:
    """How an agent host should start this anchorfs: its own script, else this interpreter."""
    script = Path(sys.executable).with_name("anchorfs")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("anchorfs")
    if found:
        return [found]
    return [os.path.abspath(sys.executable), "-m", "anchorfs.cli.commands"]


def mcp_config(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The `mcpServers` entry for this workspace, as agent hosts read it from `.mcp.json`."""
    command = _command()
    return {
        "type": "stdio",
        "command": command[0],
        "args": [*command[1:], "mcp", "--root", str(Path(root).resolve())],
    }


def write_mcp_config(root: str | os.PathLike[str], *, host: str = "claude", absolute: bool = True) -> Path:
    """Write (or update) `host`'s MCP config (`.mcp.json` for Claude Code); other servers in
    it are kept. `absolute` (the default here, as `init --mcp` always wrote) names this install's
    script and the workspace's root; `anchorfs init --for HOST` writes the portable form.

    It comes with the repository like the state folder: a link there is refused in one line,
    never read or written through, and a file that does not parse is refused, nothing written
    (`anchorfs.agents.hosts`).
    """
    from .hosts import write_mcp

    return write_mcp(root, host, absolute=absolute).path
