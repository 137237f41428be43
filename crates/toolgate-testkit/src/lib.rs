//! Test kit for toolgate: fake MCP peers and fixtures. Not published.
