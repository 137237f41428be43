//! Harnesses shared by several test modules of this binary.

pub mod gate;
pub mod hooks;
pub mod model_mock;
