//! The subcommands of `p4sec`: one module per command (or family of commands), each with its
//! flags (a `clap::Args` struct) and the function that runs it; [`parse_defines`] is shared by
//! the two that run the preprocessor.

pub mod ascon_serve;
pub mod bench;
pub mod compile;
pub mod stf;
pub mod switch;
pub mod switch_cli;

/// `-D NAME` / `-D NAME=VALUE` as the preprocessor takes them.
fn parse_defines(defs: &[String]) -> Vec<(String, Option<String>)> {
    defs.iter()
        .map(|d| match d.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (d.clone(), None),
        })
        .collect()
}
