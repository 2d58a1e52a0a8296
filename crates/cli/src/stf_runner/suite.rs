//! Running a suite folder of STF tests (programs spread over the cores) and reporting: counts, the
//! failing programs with the class of their failure, written into a Markdown report section.

use super::run::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One program of a suite and its tests.
pub(super) struct SuiteProgram {
    p4: PathBuf,
    /// (test name, STF file, generated): a generated test (`NAME/NAME_k.stf`) predicts every output
    /// packet.
    tests: Vec<(String, PathBuf, bool)>,
}

/// The programs of a suite folder: `NAME.p4` with `NAME.stf` (hand-written tests) and/or a folder
/// `NAME/` of `.stf` files (generated tests, e.g. by p4testgen), each run on a fresh switch.
pub(super) fn collect_suite(dir: &Path) -> Result<Vec<SuiteProgram>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".p4"))
                .map(|s| s.to_string())
        })
        .collect();
    names.sort();
    let mut out = vec![];
    for n in names {
        let mut tests = vec![];
        let single = dir.join(format!("{n}.stf"));
        if single.is_file() {
            tests.push((n.clone(), single, false));
        }
        let sub = dir.join(&n);
        if sub.is_dir() {
            let rd = std::fs::read_dir(&sub)
                .map_err(|e| format!("cannot read {}: {e}", sub.display()))?;
            let mut gen: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "stf"))
                .collect();
            // NAME_2 before NAME_10
            gen.sort_by_key(|p| {
                let stem = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("")
                    .to_string();
                let digits = stem
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                let (head, num) = stem.split_at(stem.len() - digits);
                (
                    head.to_string(),
                    num.parse::<u64>().unwrap_or(0),
                    stem.clone(),
                )
            });
            for p in gen {
                let stem = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("")
                    .to_string();
                tests.push((format!("{n}/{stem}"), p, true));
            }
        }
        if !tests.is_empty() {
            out.push(SuiteProgram {
                p4: dir.join(format!("{n}.p4")),
                tests,
            });
        }
    }
    Ok(out)
}

/// Compile one suite program once (its folder on the include path) and run each of its tests on a
/// fresh switch.
pub(super) fn run_suite_program(dir: &Path, sp: &SuiteProgram) -> Vec<(String, StfResult)> {
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compile(&sp.p4, &[dir.to_path_buf()], &[])
    }));
    let prog = match compiled {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return sp
                .tests
                .iter()
                .map(|(n, _, _)| (n.clone(), StfResult::failed(format!("compile error: {e}"))))
                .collect()
        }
        Err(_) => {
            return sp
                .tests
                .iter()
                .map(|(n, _, _)| {
                    (
                        n.clone(),
                        StfResult::failed("internal error: the compiler panicked (a bug)".into()),
                    )
                })
                .collect()
        }
    };
    let mut out = vec![];
    for (name, stf, generated) in &sp.tests {
        let r = match std::fs::read_to_string(stf) {
            Err(e) => StfResult::failed(format!("cannot read {}: {e}", stf.display())),
            Ok(text) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_stf(prog.clone(), &text, false)
            })) {
                Err(_) => StfResult::failed("internal error: the engine panicked (a bug)".into()),
                Ok(mut r) => {
                    if *generated && !r.stray_ports.is_empty() {
                        r.passed = false;
                        let ports: Vec<String> =
                            r.stray_ports.iter().map(|p| p.to_string()).collect();
                        r.messages.push(format!(
                            "packets on port(s) {} that the test does not expect",
                            ports.join(", ")
                        ));
                    }
                    r
                }
            },
        };
        out.push((name.clone(), r));
    }
    out
}

/// The reasons written for failing programs: lines `PROGRAM: reason` (`#` starts a comment line).
pub(super) fn read_notes(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once(": ")
            .ok_or_else(|| format!("{}:{}: expected `PROGRAM: reason`", path.display(), i + 1))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// What kind of failure a test's first message shows.
pub(super) fn failure_class(msg: &str) -> &'static str {
    if msg.starts_with("compile error") {
        "compile refusal"
    } else if msg.starts_with("cannot load") {
        "load refusal"
    } else if msg.starts_with("internal error") {
        "panic"
    } else if msg.starts_with("bad STF file")
        || (msg.starts_with("line ") && !msg.contains("expect"))
    {
        "control-plane command refused"
    } else {
        "wrong output"
    }
}

/// The Markdown section of one suite: counts, then one row per program with failing tests.
pub(super) fn report_section(
    dir: &Path,
    cmd: &str,
    results: &[(String, StfResult)],
    programs: usize,
    notes: &BTreeMap<String, String>,
) -> String {
    let title = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| dir.display().to_string());
    let pass = results.iter().filter(|(_, r)| r.passed).count();
    let mut md = String::new();
    let _ = writeln!(md, "## {title}\n\nGenerated by `{cmd}`.\n");
    let _ = writeln!(
        md,
        "**{pass} passed, {} failed** of {} tests ({programs} programs).\n",
        results.len() - pass,
        results.len()
    );
    // program -> (tests, failed test names, first message of the first failure)
    let mut by_prog: Vec<(String, usize, Vec<String>, String)> = vec![];
    for (n, r) in results {
        let (prog, test) = match n.split_once('/') {
            Some((p, t)) => (p.to_string(), t.to_string()),
            None => (n.clone(), n.clone()),
        };
        if by_prog.last().is_none_or(|l| l.0 != prog) {
            by_prog.push((prog, 0, vec![], String::new()));
        }
        let Some(last) = by_prog.last_mut() else {
            continue;
        };
        last.1 += 1;
        if !r.passed {
            if last.2.is_empty() {
                last.3 = r
                    .messages
                    .first()
                    .and_then(|m| m.lines().next())
                    .unwrap_or("")
                    .to_string();
            }
            last.2.push(
                test.rsplit('_')
                    .next()
                    .filter(|k| k.chars().all(|c| c.is_ascii_digit()))
                    .map(|k| format!("_{k}"))
                    .unwrap_or(test),
            );
        }
    }
    if pass < results.len() {
        let _ = writeln!(
            md,
            "| Program | Failed | Class | Reason | First message |\n|---|---|---|---|---|"
        );
        let cell = |s: &str| {
            s.replace('|', "\\|")
                .replace(&format!("{}/", dir.display()), "")
        };
        for (prog, n, failed, first) in by_prog.iter().filter(|p| !p.2.is_empty()) {
            let which = if *n > 1 {
                format!("{}/{n} ({})", failed.len(), failed.join(" "))
            } else {
                "1/1".to_string()
            };
            let reason = notes
                .get(prog)
                .map(|r| cell(r))
                .unwrap_or_else(|| "(not analysed)".into());
            let mut first = cell(first).replace('`', "'");
            if first.chars().count() > 140 {
                first = first.chars().take(140).collect::<String>() + "...";
            }
            let _ = writeln!(
                md,
                "| {prog} | {which} | {} | {reason} | `{first}` |",
                failure_class(&first)
            );
        }
        md.push('\n');
    }
    md
}

/// Put `section` (starting `## TITLE`) into a report in place of the section with the same title,
/// or at the end.
pub(super) fn replace_section(old: &str, section: &str) -> String {
    let title = section.lines().next().unwrap_or("");
    let mut out = String::from(
        "# STF conformance\n\nOne section per suite, each regenerated by the command it shows.\n\n",
    );
    let mut kept = vec![];
    let mut cur: Option<(String, String)> = None;
    for line in old.lines() {
        if line.starts_with("## ") {
            kept.extend(cur.take());
            cur = Some((line.to_string(), String::new()));
        }
        if let Some((_, body)) = cur.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    kept.extend(cur);
    let mut placed = false;
    for (t, body) in kept {
        if t == title {
            out.push_str(section);
            placed = true;
        } else {
            out.push_str(&body);
        }
    }
    if !placed {
        out.push_str(section);
    }
    out
}

/// Run every test of the suite folder `dir` (see `collect_suite`), programs spread over the
/// available cores.
pub fn run_suite(dir: &Path, report: Option<&Path>, notes: Option<&Path>) -> ExitCode {
    let programs = match collect_suite(dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let start = std::time::Instant::now();
    let jobs = std::env::var("P4SEC_STF_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .clamp(1, programs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Vec<(String, StfResult)>>>> =
        std::sync::Mutex::new((0..programs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(sp) = programs.get(i) else { break };
                let r = run_suite_program(dir, sp);
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
            });
        }
    });
    let results: Vec<(String, StfResult)> = results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let (mut pass, mut fail) = (0, 0);
    for (n, r) in &results {
        if r.passed {
            pass += 1;
            println!("PASS {n}");
        } else {
            fail += 1;
            let first = r.messages.first().cloned().unwrap_or_default();
            println!("FAIL {n}: {}", first.lines().next().unwrap_or(""));
        }
    }
    // the engine every program of the suite was loaded on (a bad P4SEC_ENGINE failed every load)
    let engine = p4sec_engine::Backend::from_env()
        .map(|b| format!(", {b} engine"))
        .unwrap_or_default();
    eprintln!(
        "{} tests of {} programs in {:.1} s ({jobs} threads{engine})",
        results.len(),
        programs.len(),
        start.elapsed().as_secs_f64()
    );
    println!("{pass} passed, {fail} failed");
    if let Some(path) = report {
        // the shared corpora named through their variable, so the report reads the same on every
        // machine
        let shown = std::env::var("P4SEC_SHARED")
            .ok()
            .and_then(|b| {
                dir.strip_prefix(&b)
                    .ok()
                    .map(|r| format!("$P4SEC_SHARED/{}", r.display()))
            })
            .unwrap_or_else(|| dir.display().to_string());
        let cmd = format!(
            "p4sec stf --suite {shown} --report {}{}",
            path.display(),
            notes
                .map(|n| format!(" --notes {}", n.display()))
                .unwrap_or_default()
        );
        let notes = match notes.map(read_notes).transpose() {
            Ok(n) => n.unwrap_or_default(),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        let section = report_section(dir, &cmd, &results, programs.len(), &notes);
        let old = std::fs::read_to_string(path).unwrap_or_default();
        if let Err(e) = std::fs::write(path, replace_section(&old, &section)) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
    if fail == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_sections_are_replaced_in_place() {
        let a = replace_section("", "## one\n\nfirst\n");
        let b = replace_section(&a, "## two\n\nsecond\n");
        let c = replace_section(&b, "## one\n\nagain\n");
        assert!(c.contains("again") && c.contains("second") && !c.contains("first"));
        assert!(c.find("## one").unwrap() < c.find("## two").unwrap());
        assert_eq!(
            failure_class("compile error: x.p4:1:1: error: y"),
            "compile refusal"
        );
        assert_eq!(
            failure_class("port 0, packet 1 (expect on line 4): expected 00"),
            "wrong output"
        );
    }
}
