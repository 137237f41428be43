"""Capture a stdio MCP server's tools/list as JSON (the fixtures of tests/it/packs_pypi.rs).

How the fixtures were made (PyPI packages, pinned versions):

    python3 -m venv /tmp/venv
    /tmp/venv/bin/pip install mcp-server-git==2026.10.19 mcp-server-fetch==2026.10.24
    git init /tmp/repo
    python3 capture_tools.py /tmp/venv/bin/mcp-server-git --repository /tmp/repo \
        > mcp-server-git-2026.10.19.tools.json
    python3 capture_tools.py /tmp/venv/bin/mcp-server-fetch \
        > mcp-server-fetch-2026.10.24.tools.json

To refresh after a version bump: rerun with the new version, rename the file, and update the
version in the test and in the pack's `servers:` line.
"""
import json, subprocess, sys
cmd = sys.argv[1:]
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m): p.stdin.write(json.dumps(m)+"\n"); p.stdin.flush()
send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cap","version":"0"}}})
init = json.loads(p.stdout.readline())
send({"jsonrpc":"2.0","method":"notifications/initialized"})
send({"jsonrpc":"2.0","id":2,"method":"tools/list"})
while True:
    r = json.loads(p.stdout.readline())
    if r.get("id") == 2: break
p.kill()
print(json.dumps({"server": init["result"]["serverInfo"], "tools": r["result"]["tools"]}, indent=2))
