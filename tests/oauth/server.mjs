// An OAuth-protected MCP server for toolgate's tests (`crates/toolgate/tests/remote_oauth.rs`).
//
// Real parts of the TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in tests/package.json):
// the MCP server (`McpServer` over `StreamableHTTPServerTransport`, stateless), its bearer
// middleware (`requireBearerAuth`: 401 with `resource_metadata`, 403 `insufficient_scope`), and
// its authorization server router (`mcpAuthRouter`: RFC 8414 and RFC 9728 metadata, dynamic
// registration, authorize with PKCE, token, revocation). The SDK's demo provider implements
// neither refresh nor revocation, so this file has a small in-memory provider that does
// (refresh tokens rotate: each one is good for one refresh).
//
// Prints `{"port":N}` on stdout when listening on 127.0.0.1. Settings (environment):
//   OAUTH_TOKEN_TTL   access token lifetime in seconds (default 3600)
//   OAUTH_SCOPES      scopes_supported, space-separated (default "mcp:read mcp:write")
//   OAUTH_ISS=1       send `iss` (RFC 9207) in authorization responses and advertise it
//   OAUTH_CIMD=1      advertise client ID metadata documents: an https client_id is accepted
//                     as a public client with a loopback redirect URI (this stands in for the
//                     AS fetching the document, which the tests cannot host over https)
//   OAUTH_NO_RESOURCE_METADATA_PARAM=1  leave `resource_metadata` out of WWW-Authenticate
//                     (clients must then find the metadata at the well-known URL)
// Test controls (POST unless noted):
//   GET /test/stats                      counters and what was requested
//   /test/require?scope=a%20b            the scopes /mcp requires from now on
//   /test/revoke-refresh-tokens          the AS forgets every refresh token
//   /test/forget-clients                 the AS forgets every registered client
//   /test/mode?authorize=normal|wrong-state|deny
import { randomUUID } from 'node:crypto';
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpAuthRouter, createOAuthMetadata, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidGrantError, InvalidTokenError, InvalidRequestError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

const ttl = Number(process.env.OAUTH_TOKEN_TTL ?? 3600);
const scopesSupported = (process.env.OAUTH_SCOPES ?? 'mcp:read mcp:write').split(' ').filter(Boolean);
const sendIss = process.env.OAUTH_ISS === '1';
const cimd = process.env.OAUTH_CIMD === '1';
const noResourceMetadataParam = process.env.OAUTH_NO_RESOURCE_METADATA_PARAM === '1';

const stats = {
  registrations: 0,
  authorizations: 0,
  codeExchanges: 0,
  refreshes: 0,
  refreshesRefused: 0,
  revocations: [],
  authorizeRequests: [],
  tokenResources: [],
  mcpAccepted: 0,
  metadataDocumentClients: [],
};
let required = [];
let authorizeMode = 'normal';
let issuer;

class ClientsStore {
  constructor() { this.clients = new Map(); }
  async getClient(id) {
    if (cimd && id.startsWith('https://')) {
      stats.metadataDocumentClients.push(id);
      return { client_id: id, redirect_uris: ['http://127.0.0.1:1/callback'], token_endpoint_auth_method: 'none' };
    }
    return this.clients.get(id);
  }
  async registerClient(client) {
    stats.registrations++;
    this.clients.set(client.client_id, client);
    return client;
  }
}

class Provider {
  constructor() {
    this.clientsStore = new ClientsStore();
    this.codes = new Map();
    this.tokens = new Map();
    this.refreshTokens = new Map();
  }
  async authorize(client, params, res) {
    stats.authorizations++;
    stats.authorizeRequests.push({ scopes: params.scopes ?? null, resource: params.resource?.href ?? null });
    const target = new URL(params.redirectUri);
    if (authorizeMode === 'deny') {
      target.searchParams.set('error', 'access_denied');
      target.searchParams.set('error_description', 'the user said no');
      target.searchParams.set('state', params.state);
      return res.redirect(target.href);
    }
    const code = randomUUID();
    this.codes.set(code, { client, params });
    target.searchParams.set('code', code);
    target.searchParams.set('state', authorizeMode === 'wrong-state' ? `forged-${params.state}` : params.state);
    if (sendIss) target.searchParams.set('iss', issuer);
    res.redirect(target.href);
  }
  async challengeForAuthorizationCode(_client, code) {
    const data = this.codes.get(code);
    if (!data) throw new InvalidGrantError('unknown authorization code');
    return data.params.codeChallenge;
  }
  async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
    const data = this.codes.get(code);
    if (!data || data.client.client_id !== client.client_id) throw new InvalidGrantError('unknown authorization code');
    if (redirectUri !== data.params.redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request');
    if ((resource?.href ?? null) !== (data.params.resource?.href ?? null)) throw new InvalidGrantError('resource differs from the authorization request');
    this.codes.delete(code);
    stats.codeExchanges++;
    stats.tokenResources.push(resource?.href ?? null);
    return this.issue(client.client_id, data.params.scopes ?? [], resource?.href);
  }
  async exchangeRefreshToken(client, refreshToken, _scopes, resource) {
    stats.refreshes++;
    const data = this.refreshTokens.get(refreshToken);
    if (!data || data.clientId !== client.client_id) {
      stats.refreshesRefused++;
      throw new InvalidGrantError('the refresh token is invalid or was revoked');
    }
    this.refreshTokens.delete(refreshToken);
    stats.tokenResources.push(resource?.href ?? null);
    return this.issue(client.client_id, data.scopes, data.resource);
  }
  issue(clientId, requested, resource) {
    // Only scopes the server supports are granted (a real AS drops or refuses the others).
    const scopes = requested.filter((s) => scopesSupported.includes(s));
    const access = randomUUID();
    const refresh = randomUUID();
    this.tokens.set(access, { clientId, scopes, resource, expiresAt: Date.now() + ttl * 1000 });
    this.refreshTokens.set(refresh, { clientId, scopes, resource });
    return { access_token: access, token_type: 'Bearer', expires_in: ttl, refresh_token: refresh, scope: scopes.join(' ') };
  }
  async verifyAccessToken(token) {
    const data = this.tokens.get(token);
    if (!data) throw new InvalidTokenError('unknown or revoked token');
    return { token, clientId: data.clientId, scopes: data.scopes, expiresAt: Math.floor(data.expiresAt / 1000), resource: data.resource ? new URL(data.resource) : undefined };
  }
  async revokeToken(_client, request) {
    stats.revocations.push(request.token_type_hint ?? null);
    this.tokens.delete(request.token);
    this.refreshTokens.delete(request.token);
  }
}

const provider = new Provider();
const app = express();
const listener = app.listen(0, '127.0.0.1', () => {
  const port = listener.address().port;
  issuer = `http://127.0.0.1:${port}/`;
  const mcpUrl = new URL(`http://127.0.0.1:${port}/mcp`);
  const noLimit = { rateLimit: false };
  if (cimd) {
    const metadata = createOAuthMetadata({ provider, issuerUrl: new URL(issuer), scopesSupported });
    app.get('/.well-known/oauth-authorization-server', (_req, res) => res.json({ ...metadata, client_id_metadata_document_supported: true }));
  }
  app.use(mcpAuthRouter({
    provider,
    issuerUrl: new URL(issuer),
    resourceServerUrl: mcpUrl,
    scopesSupported,
    authorizationOptions: noLimit,
    tokenOptions: noLimit,
    clientRegistrationOptions: noLimit,
    revocationOptions: noLimit,
  }));
  const resourceMetadataUrl = noResourceMetadataParam ? undefined : getOAuthProtectedResourceMetadataUrl(mcpUrl);
  const auth = (req, res, next) => requireBearerAuth({ verifier: provider, requiredScopes: required, resourceMetadataUrl, expectedResource: mcpUrl })(req, res, next);

  app.get('/test/stats', (_req, res) => res.json(stats));
  app.post('/test/require', (req, res) => { required = String(req.query.scope ?? '').split(' ').filter(Boolean); res.json({ required }); });
  app.post('/test/revoke-refresh-tokens', (_req, res) => { provider.refreshTokens.clear(); res.json({}); });
  app.post('/test/forget-clients', (_req, res) => { provider.clientsStore.clients.clear(); res.json({}); });
  app.post('/test/mode', (req, res) => { authorizeMode = String(req.query.authorize ?? 'normal'); res.json({ authorizeMode }); });

  app.post('/mcp', auth, express.json(), async (req, res) => {
    stats.mcpAccepted++;
    const server = new McpServer({ name: 'oauth-test-server', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Who the token belongs to' }, async (extra) => ({
      content: [{ type: 'text', text: `client ${extra.authInfo?.clientId}` }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  app.use((err, _req, res, _next) => {
    if (err instanceof InvalidRequestError) return res.status(400).json(err.toResponseObject());
    res.status(500).json({ error: 'server_error', error_description: String(err) });
  });
  process.stdout.write(JSON.stringify({ port }) + '\n');
});
