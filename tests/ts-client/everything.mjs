// A small MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk).
//
// Usage: node tests/ts-client/everything.mjs <command> [args...]
//        node tests/ts-client/everything.mjs --url <url>       (Streamable HTTP, directly)
//        node tests/ts-client/everything.mjs --sse-url <url>   (HTTP+SSE, directly)
//
// Spawns <command> as an MCP server over stdio (for example `toolgate wrap -- node
// .../server-everything/dist/index.js stdio`), then does tools/list, one tools/call and one
// prompts/get, and prints a JSON summary on ONE line of stdout for the Rust test
// (crates/toolgate/tests/everything_ts_client.rs) to assert on. Diagnostics go to stderr.
// Exits non-zero on any failure; a watchdog bounds the whole run.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const [command, ...args] = process.argv.slice(2);
if (!command) {
  console.error("usage: node everything.mjs <command> [args...]");
  process.exit(2);
}

const watchdog = setTimeout(() => {
  console.error("ts-client: timed out after 60 s");
  process.exit(3);
}, 60_000);

// Pass the whole environment on (the SDK passes only a safe subset by default): the Rust
// test points toolgate at a private pin store with TOOLGATE_PINS_DIR.
const transport =
  command === "--url"
    ? new StreamableHTTPClientTransport(new URL(args[0]))
    : command === "--sse-url"
      ? new SSEClientTransport(new URL(args[0]))
      : new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client(
  { name: "toolgate-ts-client-test", version: "0.0.0" },
  { capabilities: {} },
);

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const echo = await client.callTool({
    name: "echo",
    arguments: { message: "hello from the TypeScript SDK ✓" },
  });
  const sum = await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } });
  const prompt = await client.getPrompt({
    name: "args-prompt",
    arguments: { city: "Lisbon", state: "Lisboa" },
  });
  const summary = {
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    tools: tools.tools.map((tool) => tool.name).sort(),
    echo,
    sum,
    prompt,
  };
  process.stdout.write(JSON.stringify(summary) + "\n");
  await client.close();
  clearTimeout(watchdog);
} catch (error) {
  console.error("ts-client: failed:", error);
  process.exit(1);
}
