//! Harnesses shared by several test modules of this binary.

pub mod agent_cli;
pub mod gate;
pub mod hooks;
pub mod model_mock;
