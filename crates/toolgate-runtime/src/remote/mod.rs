//! Remote MCP servers: `toolgate wrap --url` relays a stdio client to a server over
//! Streamable HTTP (or the legacy HTTP+SSE transport), under the same interceptor as a
//! stdio child. The transport turns the upstream into a stream of frames the relay reads
//! like a child's stdout, so there is one enforcement path.

pub mod authorizer;
mod exchange;
pub mod handshake;
pub mod headers;
pub mod http;
mod legacy;
pub mod oauth;
pub mod probe;
mod sse;
mod stateless;
pub mod streamable;
