//! Table writes per second through P4Runtime: batched Write requests of LPM entries for the IPv4
//! router, from a Rust client (prost-encoded requests built ahead of time, so the client is not the
//! bottleneck). `cargo run --release -p p4sec-p4runtime --example write_rate -- [--entries N]
//! [--batch B] [--atomic] [--json FILE]` (`--atomic`: ROLLBACK_ON_ERROR batches, all or nothing).
//! Reference figures: 0.702 ms per entry for BMv2 in the P4-IPsec paper; ~107,000 entries/s for
//! P4-DPDK through Stratum; target 200,000 entries/s.

use p4sec_p4runtime::proto::p4::v1 as p4;
use p4sec_p4runtime::server::{serve, Device};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let entries = arg("--entries", 50_000);
    let batch = arg("--batch", 1000);
    let a: Vec<String> = std::env::args().collect();
    let json = a
        .iter()
        .position(|x| x == "--json")
        .and_then(|i| a.get(i + 1))
        .cloned();
    let atomicity = if a.iter().any(|x| x == "--atomic") {
        p4::write_request::Atomicity::RollbackOnError
    } else {
        p4::write_request::Atomicity::ContinueOnError
    } as i32;
    let src = include_str!("../../../programs/ipv4_router.p4");
    let prog =
        p4sec_frontend::compile_str("ipv4_router.p4", src, &Default::default()).expect("compiles");
    let info = p4sec_p4runtime::p4info::p4info(&prog);
    let table = prog
        .tables
        .iter()
        .find(|t| t.name == "RouterIngress.ipv4_lpm")
        .unwrap()
        .clone();
    let action = prog
        .actions
        .iter()
        .find(|a| a.name == "RouterIngress.set_nhop")
        .unwrap()
        .clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let device = Device::new(1, None, p4sec_externs::p4::registry());
    tokio::spawn(serve(addr, device));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut client = p4::p4_runtime_client::P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let election = Some(p4::Uint128 { high: 0, low: 1 });
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(p4::StreamMessageRequest {
        update: Some(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id: 1,
                election_id: election,
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    let mut stream = client
        .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let _ = stream.message().await;
    client
        .set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
            device_id: 1,
            election_id: election,
            action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(info),
                p4_device_config: prog.to_json().into_bytes(),
                cookie: None,
            }),
            ..Default::default()
        })
        .await
        .expect("pipeline");
    // the router table holds 65536 entries
    let n = entries.min(table.size as usize);
    let requests: Vec<p4::WriteRequest> = (0..n)
        .collect::<Vec<_>>()
        .chunks(batch)
        .map(|chunk| p4::WriteRequest {
            device_id: 1,
            election_id: election,
            updates: chunk
                .iter()
                .map(|i| {
                    let prefix = 0x0a00_0000u32 | ((*i as u32) << 8);
                    p4::Update {
                        r#type: p4::update::Type::Insert as i32,
                        entity: Some(p4::Entity {
                            entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                                table_id: table.id,
                                r#match: vec![p4::FieldMatch {
                                    field_id: 1,
                                    field_match_type: Some(p4::field_match::FieldMatchType::Lpm(
                                        p4::field_match::Lpm {
                                            value: prefix.to_be_bytes().to_vec(),
                                            prefix_len: 24,
                                        },
                                    )),
                                }],
                                action: Some(p4::TableAction {
                                    r#type: Some(p4::table_action::Type::Action(p4::Action {
                                        action_id: action.id,
                                        params: vec![
                                            p4::action::Param {
                                                param_id: 1,
                                                value: vec![2, 0, 0, 0, 0, 2],
                                            },
                                            p4::action::Param {
                                                param_id: 2,
                                                value: vec![2, 0, 0, 0, 0, 1],
                                            },
                                            p4::action::Param {
                                                param_id: 3,
                                                value: vec![1],
                                            },
                                        ],
                                    })),
                                }),
                                ..Default::default()
                            })),
                        }),
                    }
                })
                .collect(),
            atomicity,
            ..Default::default()
        })
        .collect();
    let start = Instant::now();
    for r in requests {
        client.write(r).await.expect("write");
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = n as f64 / secs;
    let mode = if atomicity == 0 {
        ""
    } else {
        " (ROLLBACK_ON_ERROR)"
    };
    println!("P4Runtime table writes: {n} LPM entries in batches of {batch}{mode}: {secs:.3} s = {rate:.0} entries/s");
    println!("  BMv2 (P4-IPsec paper, 0.702 ms/entry): {:.0} entries/s; P4-DPDK via Stratum: ~107000 entries/s; target 200000", 1.0 / 0.000702);
    if let Some(p) = json {
        let _ = std::fs::write(p, serde_json::json!({"entries": n, "batch": batch, "atomic": atomicity != 0, "seconds": secs, "entries_per_s": rate}).to_string());
    }
}
