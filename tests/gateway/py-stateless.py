"""The official Python SDK client (`mcp`) as a 2026-07-28 client, for the gateway's tests
(crates/toolgate/tests/gateway_clients.rs): against a gateway in front of a server that
speaks 2026-07-28 (tests/remote/python_server.py --stateless).

    tests/.venv/bin/python tests/gateway/py-stateless.py --url URL --token TOKEN

Calls `echo` and `add` and prints ONE JSON line: the negotiated revision, the results, and
every `Mcp-Session-Id` the gateway sent (none are expected). A watchdog bounds the run.
"""

import argparse
import asyncio
import json

import httpx2

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--token", required=True)
options = parser.parse_args()

session_ids: list[str] = []
versions: list[str] = []


async def remember(response: httpx2.Response) -> None:
    sid = response.headers.get("mcp-session-id")
    if sid:
        session_ids.append(sid)


async def remember_request(request: httpx2.Request) -> None:
    version = request.headers.get("mcp-protocol-version")
    if version:
        versions.append(version)


def dump(value):
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {options.token}"},
        timeout=httpx2.Timeout(30, read=60),
        event_hooks={"response": [remember], "request": [remember_request]},
    )
    server = streamable_http_client(options.url, http_client=http, terminate_on_close=False)
    async with Client(server, mode="auto", cache=None) as client:
        echo = await client.call_tool("echo", {"message": "stateless ✓"})
        add = await client.call_tool("add", {"a": 20, "b": 22})
    print(
        json.dumps(
            {
                "echo": dump(echo),
                "add": dump(add),
                "sessionIds": session_ids,
                "versions": sorted(set(versions)),
            }
        )
    )


async def watchdog() -> None:
    await asyncio.wait_for(main(), timeout=60)


asyncio.run(watchdog())
