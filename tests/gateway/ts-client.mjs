// The official TypeScript SDK client (@modelcontextprotocol/sdk) for the gateway's tests
// (crates/toolgate/tests/gateway_clients.rs), against server-everything.
//
// Usage: node tests/gateway/ts-client.mjs --url URL [--token TOKEN]   (Streamable HTTP)
//        node tests/gateway/ts-client.mjs CMD ARGS...                  (stdio, directly)
//
// Lists tools, resources and prompts, calls echo, get-sum, get-structured-content and
// get-annotated-message, reads a resource, gets a prompt, completes a prompt argument,
// follows a long-running call's progress, makes 8 calls at once, then calls get-env
// (which the gateway's test policy blocks), and prints a JSON summary on ONE line of
// stdout. Diagnostics go to stderr. A watchdog bounds the whole run.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const argv = process.argv.slice(2);
if (argv.length === 0) {
  console.error("usage: node ts-client.mjs --url URL [--token TOKEN] | CMD ARGS...");
  process.exit(2);
}

const watchdog = setTimeout(() => {
  console.error("gateway ts-client: timed out after 60 s");
  process.exit(3);
}, 60_000);

let transport;
if (argv[0] === "--url") {
  const headers = {};
  const at = argv.indexOf("--token");
  if (at !== -1) headers.Authorization = `Bearer ${argv[at + 1]}`;
  transport = new StreamableHTTPClientTransport(new URL(argv[1]), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({
    command: argv[0],
    args: argv.slice(1),
    env: process.env,
    stderr: "inherit",
  });
}
const client = new Client(
  { name: "toolgate-gateway-ts-client", version: "0.0.0" },
  { capabilities: {} },
);

try {
  await client.connect(transport);
  const http = argv[0] === "--url";
  const tools = await client.listTools();
  const resources = await client.listResources();
  const prompts = await client.listPrompts();
  const echo = await client.callTool({
    name: "echo",
    arguments: { message: "hello through the gateway ✓" },
  });
  const sum = await client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } });
  const structured = await client.callTool({
    name: "get-structured-content",
    arguments: { location: "Chicago" },
  });
  const annotated = await client.callTool({
    name: "get-annotated-message",
    arguments: { messageType: "success", includeImage: false },
  });
  const resource = await client.readResource({ uri: "demo://resource/dynamic/text/1" });
  const prompt = await client.getPrompt({
    name: "args-prompt",
    arguments: { city: "Lisbon", state: "Lisboa" },
  });
  const completion = await client.complete({
    ref: { type: "ref/prompt", name: "completable-prompt" },
    argument: { name: "department", value: "E" },
  });
  // Progress notifications on the call's stream, and several calls in flight at once.
  const progress = [];
  const long = await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  const parallel = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      client.callTool({ name: "echo", arguments: { message: `in flight ${i}` } }),
    ),
  );
  let blocked;
  try {
    blocked = await client.callTool({ name: "get-env", arguments: {} });
  } catch (error) {
    blocked = { thrown: String(error) };
  }
  const summary = {
    transport: http ? "streamable-http" : "stdio",
    sessionId: http ? (transport.sessionId ?? null) : null,
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? null,
    tools: tools.tools,
    resources: resources.resources,
    prompts: prompts.prompts,
    echo,
    sum,
    structured,
    annotated,
    resource,
    prompt,
    completion,
    long,
    progress,
    parallel,
    blocked,
  };
  process.stdout.write(JSON.stringify(summary) + "\n");
  await client.close();
  clearTimeout(watchdog);
} catch (error) {
  console.error("gateway ts-client: failed:", error);
  process.exit(1);
}
