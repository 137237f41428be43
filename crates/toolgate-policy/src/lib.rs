#![doc = include_str!("../README.md")]

pub mod action;
pub mod beneath;
pub mod cases;
pub mod command_sink;
pub mod contracts;
pub mod decision;
pub mod diag;
pub mod eval;
pub mod explain;
pub mod fingerprint;
pub mod fsfacts;
pub mod load;
pub mod model;
pub mod normalize;
pub mod protect;
pub mod rules;
pub mod schema;
pub mod session;
pub mod strict;
pub mod taint;

pub use action::{Action, Beneath, Network, Operation, Part};
pub use decision::{Contract, ContractResult, Effect};
