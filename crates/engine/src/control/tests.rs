//! Tests of the control-plane API.

use crate::testutil::*;
use crate::*;
use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};

/// Replacing a multicast group's replicas again and again (P4Runtime MODIFY) or deleting the group
/// frees its old replication nodes; a node another group still uses stays.
#[test]
fn multicast_group_changes_free_their_nodes() {
    let e = engine(ROUTER);
    for round in 0..50u32 {
        e.mc_group_set(1, &[(0, 1 + round % 3), (1, 2), (2, 3)]);
        e.mc_group_set(2, &[(0, 4)]);
    }
    let live = |e: &Engine| {
        e.replication
            .config
            .load()
            .nodes
            .iter()
            .filter(|n| n.is_some())
            .count()
    };
    assert_eq!(live(&e), 4, "three replicas of group 1 and one of group 2");
    assert!(
        e.replication.config.load().nodes.len() <= 8,
        "handles are reused ({} slots)",
        e.replication.config.load().nodes.len()
    );
    assert_eq!(
        e.replication.config.load().groups[&1]
            .iter()
            .map(|h| e.replication.config.load().nodes[*h as usize]
                .clone()
                .unwrap()
                .1[0])
            .collect::<Vec<_>>(),
        vec![2, 2, 3]
    );
    // a node shared with another group survives the first group's deletion
    let shared = e.mc_node_create(9, vec![7]);
    e.mc_group_create(3).unwrap();
    e.mc_node_associate(3, shared).unwrap();
    e.mc_node_associate(2, shared).unwrap();
    e.mc_group_delete(3).unwrap();
    assert!(e.replication.config.load().nodes[shared as usize].is_some());
    e.mc_group_delete(1).unwrap();
    e.mc_group_delete(2).unwrap();
    assert_eq!(live(&e), 0);
    assert!(e.mc_group_delete(2).is_err());
}

/// A refused change of the replication configuration publishes nothing (the version in place stays
/// the same object) and says what was wrong; an accepted one publishes a new version.
#[test]
fn refused_replication_changes_publish_nothing() {
    let e = engine(ROUTER);
    e.mirroring_add(5, 3);
    e.mc_group_create(1).unwrap();
    let n = e.mc_node_create(0, vec![2]);
    e.mc_node_associate(1, n).unwrap();
    let before = e.pre();
    assert_eq!(
        e.mirroring_delete(6),
        Err("no mirror session 6".to_string())
    );
    assert_eq!(
        e.mc_group_create(1),
        Err("multicast group 1 already exists".to_string())
    );
    assert_eq!(
        e.mc_group_delete(2),
        Err("no multicast group 2".to_string())
    );
    assert_eq!(
        e.mc_node_associate(1, n + 1),
        Err(format!("no replication node {}", n + 1))
    );
    assert_eq!(
        e.mc_node_associate(2, n),
        Err("no multicast group 2".to_string())
    );
    assert!(
        std::sync::Arc::ptr_eq(&before, &e.pre()),
        "a refused change published a new version"
    );
    assert_eq!(before.mirror.get(&5), Some(&3));
    assert_eq!(before.groups[&1], vec![n]);
    e.mirroring_delete(5).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&before, &e.pre()));
    assert!(e.pre().mirror.is_empty() && before.mirror.len() == 1);
}

const PROFILES: &str = include_str!("../../../../tests/switch/programs/profiles.p4");

/// The table API in the engine's terms: entries pointing at action profile members, atomic batches
/// that roll back, per-op results, member changes reaching the entries, and the error kinds.
#[test]
fn table_api_batches_and_profile_members() {
    use crate::tables::{EntryWrite, Group, ProfileTarget, TableErrorKind as K, TableOp};
    let e = engine(PROFILES);
    let ti = e.table_index("I.prof_t").unwrap();
    let pi = e
        .prog
        .action_profiles
        .iter()
        .position(|p| p.selector.is_none())
        .unwrap();
    let set_prof = e
        .prog
        .actions
        .iter()
        .position(|a| a.name == "I.set_prof")
        .unwrap() as u32;
    let tag = |v: u64| ActionCall {
        action: set_prof,
        args: vec![Value::new(8, v)],
    };
    let op = |dst: u64| {
        TableOp::Insert(
            ti,
            EntryWrite {
                target: Some(ProfileTarget::Member(1)),
                ..EntryWrite::new(TableEntry {
                    matches: vec![FieldMatch::Exact(Value::new(48, dst))],
                    action: e.prog.tables[ti].default_action.clone(),
                    priority: 0,
                })
            },
        )
    };
    let kind = |r: Result<(), (usize, crate::tables::TableError)>| r.map_err(|(i, e)| (i, e.kind));
    // no member 1 yet
    assert_eq!(
        kind(e.tables_apply_atomic(vec![op(1)])),
        Err((0, K::NotFound))
    );
    e.profile_member_insert(pi, 1, tag(5)).unwrap();
    // the second insert fails: the first is rolled back with it
    assert_eq!(
        kind(e.tables_apply_atomic(vec![op(1), op(2), op(1)])),
        Err((2, K::AlreadyExists))
    );
    assert_eq!(e.table_len(ti).unwrap(), 0);
    // per op: the first applies, the duplicate fails on its own
    let r: Vec<_> = e
        .tables_apply(vec![op(1), op(1)])
        .into_iter()
        .map(|r| r.map_err(|e| e.kind))
        .collect();
    assert_eq!(r, [Ok(()), Err(K::AlreadyExists)]);
    let read = e.table_read(ti).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].target, Some(ProfileTarget::Member(1)));
    assert_eq!(read[0].entry.action, tag(5));
    // a member's new action reaches its entries; a member in use cannot go
    e.profile_member_modify(pi, 1, tag(7)).unwrap();
    assert_eq!(e.table_read(ti).unwrap()[0].entry.action, tag(7));
    assert_eq!(
        e.profile_member_delete(pi, 1).unwrap_err().kind,
        K::Precondition
    );
    assert_eq!(
        e.profile_member_insert(pi, 1, tag(1)).unwrap_err().kind,
        K::AlreadyExists
    );
    // an action profile without a selector has no groups; an entry there takes a member
    let g = Group {
        members: vec![],
        max_size: 0,
    };
    assert_eq!(
        e.profile_group_insert(pi, 3, g).unwrap_err().kind,
        K::Invalid
    );
    let mut w = EntryWrite::new(TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(48, 9))],
        action: tag(1),
        priority: 0,
    });
    assert_eq!(
        kind(e.tables_apply_atomic(vec![TableOp::Insert(ti, w.clone())])),
        Err((0, K::Invalid))
    );
    w.target = Some(ProfileTarget::Group(3));
    assert_eq!(
        kind(e.tables_apply_atomic(vec![TableOp::Insert(ti, w)])),
        Err((0, K::Invalid))
    );
    // deleting the entry frees the member
    let m = read[0].entry.clone();
    assert_eq!(
        kind(e.tables_apply_atomic(vec![TableOp::Delete(ti, m)])),
        Ok(())
    );
    e.profile_member_delete(pi, 1).unwrap();
    assert!(e.profile_members().is_empty());
}

/// Table changes made in the version the previous change replaced (once no worker holds it) give
/// the same tables as fresh copies: LPM routes inserted, modified and deleted over rounds, one
/// change per version, a worker forwarding to every route after each round (so that it lets go of
/// the older versions), every packet's port against a model, on both engines.
#[test]
fn changes_made_in_replaced_versions_keep_the_tables_right() {
    for backend in [Backend::Closure, Backend::Native] {
        let prog = p4sec_frontend::compile_str("router.p4", ROUTER, &Default::default()).unwrap();
        let e = Engine::with_backend(
            std::sync::Arc::new(prog),
            &test_externs::registry(),
            backend,
        )
        .unwrap();
        let t = e.table_index("RouterIngress.ipv4_lpm").unwrap();
        let entry = |prefix: u32, len: u32, port: u64| {
            route_entry(&e, prefix, len, port, 0x0200_0000_0000 | port)
        };
        let mut model: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        let mut changes = 0u64;
        for round in 0..8u32 {
            // new routes of two lengths (/24 inside a /16), then some changed and some deleted
            for x in 0..40u32 {
                let (p24, p16) = (0x0a00_0000 | round << 16 | x << 8, 0x0b00_0000 | x << 16);
                let port = ((x + round) % 7 + 1) as u64;
                e.table_insert(t, entry(p24, 24, port)).unwrap();
                model.insert((p24, 24), port);
                changes += 1;
                if round == 0 {
                    e.table_insert(t, entry(p16, 16, port)).unwrap();
                    model.insert((p16, 16), port);
                    changes += 1;
                }
            }
            let keys: Vec<(u32, u32)> = model.keys().copied().collect();
            for (j, &(p, l)) in keys.iter().enumerate() {
                if (j as u32 + round).is_multiple_of(5) {
                    let port = (j as u64 + 3) % 7 + 1;
                    e.table_modify(t, entry(p, l, port)).unwrap();
                    model.insert((p, l), port);
                    changes += 1;
                } else if (j as u32 + round).is_multiple_of(11) {
                    e.table_delete(t, &entry(p, l, model[&(p, l)])).unwrap();
                    model.remove(&(p, l));
                    changes += 1;
                }
            }
            assert_eq!(e.table_len(t).unwrap(), model.len());
            for (&(p, l), &port) in &model {
                out.clear();
                let host = p | (0x0000_00ff & (u32::MAX >> l));
                e.process(&mut w, 0, &ipv4_packet(host.to_be_bytes(), 64), &mut out);
                let got: Vec<u32> = out.iter().map(|(q, _)| q).collect();
                assert_eq!(
                    got,
                    vec![port as u32],
                    "{backend}: {p:#x}/{l}, round {round}"
                );
            }
        }
        // each change made one version, counted as reused or copied (what `/metrics` reports)
        let (reused, copied) = e.table_versions_made(t).unwrap();
        assert_eq!(reused + copied, changes, "{backend}");
        assert!(
            reused > changes / 2,
            "{backend}: most changes reused the replaced version ({reused} of {changes})"
        );
    }
}
