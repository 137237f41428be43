//! Zero-copy JSON-RPC and MCP views over raw bytes.
//!
//! Everything here is pure: it looks at the bytes of one newline-delimited frame and
//! tells the proxy what it is, without re-serialising anything the proxy forwards.
