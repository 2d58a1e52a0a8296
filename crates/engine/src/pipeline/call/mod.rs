//! Calls: the v1model built-ins ([`builtins`]) and calls of registered extern methods
//! ([`externs`]), with their argument planning at load time ([`planning`]: layouts resolved once,
//! call sites an extern binds for itself) and the general marshalling path ([`marshal`]).

mod builtins;
mod externs;
mod marshal;
mod planning;

pub(crate) use planning::{dir_of, plan_arg, PlannedCall};

#[cfg(test)]
mod tests;
