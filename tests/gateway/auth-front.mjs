// A loopback forwarding proxy that adds `Authorization: Bearer $GATEWAY_TOKEN` to every
// request, for clients that cannot send a bearer token (the MCP conformance suite), in
// front of `toolgate gateway` (crates/toolgate/tests/gateway_clients.rs).
//
//   GATEWAY_TOKEN=... node tests/gateway/auth-front.mjs HOST:PORT
//
// Listens on 127.0.0.1 (a free port, printed as `listening <port>` on stdout) and relays
// each request (method, path, headers including Host and Origin, body) to HOST:PORT and its response back, streamed
// both ways (SSE responses pass through as they come). The token comes from the
// environment, never from argv.
import http from 'node:http';

const [target] = process.argv.slice(2);
const token = process.env.GATEWAY_TOKEN;
if (!target || !token) {
  console.error('usage: GATEWAY_TOKEN=... auth-front.mjs HOST:PORT');
  process.exit(2);
}
const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  // Host and Origin pass unchanged: the gateway judges what the client sent.
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const upstream = http.request(
    { host, port, method: req.method, path: req.url, headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    },
  );
  upstream.on('error', (e) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`auth-front: ${e}\n`);
    } else {
      res.destroy();
    }
  });
  // A client that goes away (a closed SSE stream) closes the gateway's side too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
// Ends with its stdin (the test's handle), so that it never outlives the test.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
