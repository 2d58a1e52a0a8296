//! The packet replication engine's configuration: mirror sessions, multicast groups and their
//! replication nodes, published as a new version on each change.

use crate::{Engine, Pre};
use std::convert::Infallible;
use std::sync::Arc;

impl Pre {
    /// A new node in the first free handle (handles of deleted nodes are reused).
    fn add_node(&mut self, rid: u32, ports: Vec<u32>) -> u32 {
        match self.nodes.iter().position(Option::is_none) {
            Some(h) => {
                self.nodes[h] = Some((rid, ports));
                h as u32
            }
            None => {
                self.nodes.push(Some((rid, ports)));
                self.nodes.len() as u32 - 1
            }
        }
    }
    /// Delete the nodes no group refers to any more (after a group lost them).
    fn release_nodes(&mut self, handles: &[u32]) {
        for &h in handles {
            if !self.groups.values().any(|g| g.contains(&h)) {
                if let Some(n) = self.nodes.get_mut(h as usize) {
                    *n = None;
                }
            }
        }
        while matches!(self.nodes.last(), Some(None)) {
            self.nodes.pop();
        }
    }
}

impl Engine {
    /// Change the configuration under the write lock: `f` changes a copy, which is published as the
    /// new version if `f` succeeds (a failed change publishes nothing).
    fn update_pre<R, E>(&self, f: impl FnOnce(&mut Pre) -> Result<R, E>) -> Result<R, E> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let r = f(&mut p)?;
        self.replication.config.store(Arc::new(p));
        Ok(r)
    }

    pub fn mirroring_add(&self, session: u32, port: u32) {
        let Ok(()) = self.update_pre::<_, Infallible>(|p| {
            p.mirror.insert(session, port);
            Ok(())
        });
    }

    pub fn mirroring_delete(&self, session: u32) -> Result<(), String> {
        self.update_pre(|p| {
            p.mirror
                .remove(&session)
                .ok_or_else(|| format!("no mirror session {session}"))?;
            Ok(())
        })
    }

    pub fn pre(&self) -> Arc<Pre> {
        self.replication.config.load_full()
    }

    pub fn mc_group_create(&self, grp: u32) -> Result<(), String> {
        self.update_pre(|p| {
            if p.groups.contains_key(&grp) {
                return Err(format!("multicast group {grp} already exists"));
            }
            p.groups.insert(grp, vec![]);
            Ok(())
        })
    }

    pub fn mc_group_delete(&self, grp: u32) -> Result<(), String> {
        self.update_pre(|p| {
            let old = p
                .groups
                .remove(&grp)
                .ok_or_else(|| format!("no multicast group {grp}"))?;
            p.release_nodes(&old);
            Ok(())
        })
    }

    /// Create a replication node; returns its handle (0, 1, 2, ... in creation order).
    pub fn mc_node_create(&self, rid: u32, ports: Vec<u32>) -> u32 {
        let Ok(h) = self.update_pre::<_, Infallible>(|p| Ok(p.add_node(rid, ports)));
        h
    }

    pub fn mc_node_associate(&self, grp: u32, node: u32) -> Result<(), String> {
        self.update_pre(|p| {
            if !matches!(p.nodes.get(node as usize), Some(Some(_))) {
                return Err(format!("no replication node {node}"));
            }
            p.groups
                .get_mut(&grp)
                .ok_or_else(|| format!("no multicast group {grp}"))?
                .push(node);
            Ok(())
        })
    }

    /// Replace a multicast group's replicas with `(rid, port)` pairs (the P4Runtime view of the
    /// PRE).
    pub fn mc_group_set(&self, grp: u32, replicas: &[(u32, u32)]) {
        let Ok(()) = self.update_pre::<_, Infallible>(|p| {
            let old = p.groups.remove(&grp).unwrap_or_default();
            p.release_nodes(&old);
            let handles = replicas
                .iter()
                .map(|(rid, port)| p.add_node(*rid, vec![*port]))
                .collect();
            p.groups.insert(grp, handles);
            Ok(())
        });
    }
}
