// An HTTP front for a stdio MCP server, for toolgate's conformance test: the MCP
// conformance suite speaks Streamable HTTP, toolgate speaks stdio.
//
//   node conformance/http-front.mjs RECORD_DIR -- CMD ARGS...
//
// Listens on 127.0.0.1 (a free port, printed as `listening <port>` on stdout). Each
// Streamable HTTP session (a new `initialize`) starts its own `CMD ARGS...` (toolgate wrap
// in front of the target, or the target itself) and relays every JSON-RPC message between
// the session and that process's stdio, unchanged. Every message is appended to
// RECORD_DIR/client-<n>.jsonl as {"dir":"in"|"out","msg":...} ("in": toward the server);
// the process gets CONFORMANCE_RECORD=RECORD_DIR/server-<n>.jsonl, where the target
// records what it receives and sends, so the two sides of toolgate can be compared.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
if (dash !== 1 || argv.length < 3) {
  console.error('usage: http-front.mjs RECORD_DIR -- CMD ARGS...');
  process.exit(2);
}
const recordDir = argv[0];
const [command, ...args] = argv.slice(2);

const sessions = new Map();
let count = 0;

async function newSession() {
  const n = ++count;
  const clientRecord = join(recordDir, `client-${n}.jsonl`);
  const note = (dir, msg) => appendFileSync(clientRecord, JSON.stringify({ dir, msg }) + '\n');
  const child = new StdioClientTransport({
    command,
    args,
    env: { ...process.env, CONFORMANCE_RECORD: join(recordDir, `server-${n}.jsonl`) },
    stderr: 'inherit',
  });
  // The client's requests still awaiting their response, oldest first: a message the
  // server sends while one is outstanding goes on that request's stream.
  const outstanding = [];
  const session = { child, transport: null };
  const port = server.address().port;
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableDnsRebindingProtection: true,
    allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`],
    onsessioninitialized: (id) => sessions.set(id, session),
  });
  session.transport = transport;
  transport.onmessage = (msg) => {
    note('in', msg);
    if ('method' in msg && 'id' in msg) outstanding.push(msg.id);
    child.send(msg).catch((e) => console.error(`http-front: to the server: ${e}`));
  };
  child.onmessage = (msg) => {
    note('out', msg);
    let options;
    if (!('method' in msg) && 'id' in msg) {
      const at = outstanding.indexOf(msg.id);
      if (at >= 0) outstanding.splice(at, 1);
    } else if (outstanding.length > 0) {
      options = { relatedRequestId: outstanding[outstanding.length - 1] };
    }
    transport.send(msg, options).catch((e) => console.error(`http-front: to the client: ${e}`));
  };
  child.onerror = (e) => console.error(`http-front: server process: ${e}`);
  transport.onclose = () => {
    child.close().catch(() => {});
  };
  await child.start();
  return session;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const server = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://127.0.0.1').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    // DNS rebinding protection (the suite checks it): loopback host names only.
    const port = server.address().port;
    if (![`127.0.0.1:${port}`, `localhost:${port}`].includes(req.headers.host ?? '')) {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'invalid host' } }));
      return;
    }
    let body;
    if (req.method === 'POST') {
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } }));
        return;
      }
    }
    const sid = req.headers['mcp-session-id'];
    let session = sid ? sessions.get(sid) : undefined;
    if (!session) {
      if (req.method === 'POST' && !sid && body?.method === 'initialize') {
        session = await newSession();
      } else {
        res.writeHead(sid ? 404 : 400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'no such session' } }));
        return;
      }
    }
    await session.transport.handleRequest(req, res, body);
  } catch (e) {
    console.error(`http-front: ${e?.stack ?? e}`);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});

const stop = () => {
  for (const s of sessions.values()) s.child.close().catch(() => {});
  server.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
