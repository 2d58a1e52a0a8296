//! Compile every `.p4` file given on the command line and print one line per file (a development aid).
fn main() {
    let mut ok = 0;
    let mut bad = 0;
    for a in std::env::args().skip(1) {
        let r = std::panic::catch_unwind(|| p4sec_frontend::compile_file(std::path::Path::new(&a), &Default::default()));
        match r {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                bad += 1;
                println!("FAIL {a}\n{}", e.messages.join("\n").lines().take(3).collect::<Vec<_>>().join("\n"));
            }
            Err(_) => {
                bad += 1;
                println!("PANIC {a}");
            }
        }
    }
    println!("{ok} compiled, {bad} failed");
}
