//! `--engine` (and P4SEC_ENGINE) picks the engine a `p4sec` command loads programs on: the choice
//! reaches the STF runner, the flag wins over the variable, and a bad value is refused up front with
//! exit status 2 and a message naming the flag or the variable and the values it takes.

mod common;

use common::root;
use std::process::{Command, Output};

fn p4sec(env: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_p4sec"));
    c.env_remove("P4SEC_ENGINE");
    if let Some(v) = env {
        c.env("P4SEC_ENGINE", v);
    }
    c.args(args).output().expect("run p4sec")
}

fn stf_suite(env: Option<&str>, extra: &[&str]) -> Output {
    let dir = root().join("tests/stf");
    let mut args = extra.to_vec();
    args.extend(["stf", "--suite", dir.to_str().unwrap()]);
    p4sec(env, &args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_flag_and_the_variable_pick_the_engine() {
    // the default: native
    let o = stf_suite(None, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("native engine)"), "{}", stderr(&o));
    let o = stf_suite(None, &["--engine", "closure"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("closure engine)"), "{}", stderr(&o));
    let o = stf_suite(Some("closure"), &[]);
    assert!(stderr(&o).contains("closure engine)"), "{}", stderr(&o));
    // the flag wins over the variable
    let o = stf_suite(Some("closure"), &["--engine", "native"]);
    assert!(stderr(&o).contains("native engine)"), "{}", stderr(&o));
}

#[test]
fn a_bad_engine_is_refused_up_front() {
    let o = stf_suite(None, &["--engine", "jit"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("jit"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--engine"), "{}", stderr(&o));
    let o = stf_suite(Some("fast"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("P4SEC_ENGINE")
            && e.contains("`fast`")
            && e.contains("closure")
            && e.contains("native"),
        "{e}"
    );
    // nothing ran
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
