"""The official Python SDK client (`mcp`, pinned in tests/requirements.txt) for the gateway's
tests (crates/toolgate/tests/gateway_clients.rs), against server-everything.

    tests/.venv/bin/python tests/gateway/py-client.py [--mode auto|legacy] --url URL --token TOKEN
    tests/.venv/bin/python tests/gateway/py-client.py [--mode auto|legacy] --stdio CMD ARGS...

Lists tools, resources and prompts, calls echo, get-sum and get-structured-content, reads a
resource, gets a prompt, then calls get-env (which the gateway's test policy blocks), and
prints a JSON summary on ONE line of stdout, with the `Mcp-Session-Id` the server gave (over
HTTP). Over HTTP the session is left open on exit (no DELETE), so that the test can go on
with it elsewhere. A watchdog bounds the whole run.
"""

import argparse
import asyncio
import json
import sys

import httpx2

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="auto")
parser.add_argument("--url")
parser.add_argument("--token")
parser.add_argument("--stdio", nargs=argparse.REMAINDER)
options = parser.parse_args()

session_ids: list[str] = []


async def remember_session(response: httpx2.Response) -> None:
    sid = response.headers.get("mcp-session-id")
    if sid and sid not in session_ids:
        session_ids.append(sid)


def dump(value):
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    if options.url:
        headers = {"Authorization": f"Bearer {options.token}"} if options.token else {}
        http = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(30, read=60),
            event_hooks={"response": [remember_session]},
        )
        server = streamable_http_client(options.url, http_client=http, terminate_on_close=False)
    else:
        command, *args = options.stdio
        server = StdioServerParameters(command=command, args=args)
    async with Client(server, mode=options.mode, cache=None) as client:
        tools = await client.list_tools()
        resources = await client.list_resources()
        prompts = await client.list_prompts()
        echo = await client.call_tool("echo", {"message": "hello from the Python SDK ✓"})
        total = await client.call_tool("get-sum", {"a": 2, "b": 40})
        structured = await client.call_tool("get-structured-content", {"location": "New York"})
        resource = await client.read_resource("demo://resource/dynamic/text/2")
        prompt = await client.get_prompt("args-prompt", {"city": "Porto", "state": "Norte"})
        blocked = await client.call_tool("get-env", {})
        summary = {
            "sessionIds": session_ids,
            "protocolVersion": client.protocol_version,
            "server": dump(client.server_info) if client.server_info else None,
            "tools": sorted(t.name for t in tools.tools),
            "resources": sorted(r.uri for r in resources.resources),
            "prompts": sorted(p.name for p in prompts.prompts),
            "echo": dump(echo),
            "sum": dump(total),
            "structured": dump(structured),
            "resource": dump(resource),
            "prompt": dump(prompt),
            "blocked": dump(blocked),
        }
    sys.stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    sys.stdout.flush()


async def bounded() -> None:
    await asyncio.wait_for(main(), timeout=60)


asyncio.run(bounded())
