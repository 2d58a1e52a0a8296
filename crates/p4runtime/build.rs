//! Generate the P4Runtime messages and the `p4.v1.P4Runtime` service from the descriptors of the
//! official `p4runtime` Python package (not from hand-copied .proto files).
use prost::Message;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=dump_descriptors.py");
    println!("cargo:rerun-if-env-changed=P4SEC_PYTHON");
    // P4SEC_PYTHON, else the checkout's virtual environment (scripts/setup), else python3
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let python = std::env::var("P4SEC_PYTHON").unwrap_or_else(|_| {
        if venv.exists() {
            venv.display().to_string()
        } else {
            "python3".into()
        }
    });
    let out = Command::new(&python).arg("dump_descriptors.py").output().unwrap_or_else(|e| {
        panic!("cannot run {python} to read the p4runtime package's descriptors: {e}; run ./scripts/setup (it makes .venv) or set P4SEC_PYTHON to a Python with python/requirements.txt installed")
    });
    if !out.status.success() {
        panic!(
            "reading the p4runtime descriptors failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let fds = prost_types::FileDescriptorSet::decode(&out.stdout[..]).expect("a FileDescriptorSet");
    // kept for the JSON mapping of messages (src/json.rs)
    let dir = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(
        std::path::Path::new(&dir).join("p4runtime_descriptors.bin"),
        &out.stdout,
    )
    .expect("write the descriptors");
    // decode errors are INVALID_ARGUMENT (src/grpc_codec.rs), not tonic's INTERNAL
    // map fields as BTreeMap: encoded in key order, so the same message gives the same bytes (a
    // P4Info with serializable enums or new types written twice is byte-identical)
    tonic_build::configure()
        .btree_map(["."])
        .codec_path("crate::grpc_codec::P4Codec")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .expect("generate P4Runtime code");
}
