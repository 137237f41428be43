//! The toolgate policy language: strict loading, normalisation of MCP tool calls into
//! actions, evaluation and explain. Pure: filesystem facts come in through a trait.

pub mod action;
pub mod decision;

pub use action::{Action, Network, Operation, Part};
pub use decision::{Contract, ContractResult, Effect};
