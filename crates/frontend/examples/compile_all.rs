//! Compile every `.p4` file given on the command line and print one line per file (a development
//! aid). `-I DIR` options (anywhere on the line) add include directories for all files.
fn main() {
    let mut ok = 0;
    let mut bad = 0;
    let mut opts = p4sec_frontend::CompileOptions::default();
    let mut files = vec![];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-I" {
            opts.include_dirs.extend(args.next().map(Into::into));
        } else if let Some(d) = a.strip_prefix("-I") {
            opts.include_dirs.push(d.into());
        } else {
            files.push(a);
        }
    }
    for a in files {
        let r = std::panic::catch_unwind(|| {
            p4sec_frontend::compile_file(std::path::Path::new(&a), &opts)
        });
        match r {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                bad += 1;
                println!(
                    "FAIL {a}\n{}",
                    e.messages
                        .join("\n")
                        .lines()
                        .take(3)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            Err(_) => {
                bad += 1;
                println!("PANIC {a}");
            }
        }
    }
    println!("{ok} compiled, {bad} failed");
}
