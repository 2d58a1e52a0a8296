//! Calls: the v1model built-ins ([`builtins`]) and calls of registered extern methods
//! ([`externs`]), with their argument planning at load time ([`planning`]: layouts resolved once,
//! call sites an extern binds for itself), the general marshalling path ([`marshal`]) and the calls
//! native code makes with its narrow arguments as words ([`direct`]).

mod builtins;
mod direct;
mod externs;
mod marshal;
mod planning;

pub(crate) use direct::{call_bound, DirectArg, DirectBound, DirectCall, DirectRet, Way};
pub(crate) use planning::{dir_of, plan_arg, PlannedCall};

#[cfg(test)]
mod bound_tests;
#[cfg(test)]
mod hash_tests;
#[cfg(test)]
mod native_tests;
#[cfg(test)]
mod tests;
