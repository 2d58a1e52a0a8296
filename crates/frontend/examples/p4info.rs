//! Compile one `.p4` file (`-I DIR` options allowed) and print its P4Info text (a development aid
//! that needs only the front end).
fn main() {
    let mut opts = p4sec_frontend::CompileOptions::default();
    let mut file = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-I" {
            opts.include_dirs.extend(args.next().map(Into::into));
        } else {
            file = Some(a);
        }
    }
    let Some(file) = file else {
        eprintln!("usage: p4info [-I DIR] FILE.p4");
        std::process::exit(2);
    };
    match p4sec_frontend::compile_file(std::path::Path::new(&file), &opts) {
        Ok(p) => print!("{}", p4sec_ir::p4info::to_text(&p)),
        Err(e) => {
            eprintln!("{}", e.messages.join("\n"));
            std::process::exit(1);
        }
    }
}
