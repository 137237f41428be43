//! Harnesses shared by several test modules of this binary.

pub mod engine;
pub mod packs_check;
pub mod shell_diff;
pub mod sink;
