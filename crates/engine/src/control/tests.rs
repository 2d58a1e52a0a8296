//! Tests of the control-plane API.

use crate::testutil::*;
use crate::*;

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
