//! Enforcement: the interceptor that puts the policy engine in front of the relay.
pub mod reply;
