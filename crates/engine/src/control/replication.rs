//! The packet replication engine's configuration: mirror sessions, multicast groups and their
//! replication nodes, published as a new version on each change.

use crate::{Engine, Pre};
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
    pub fn mirroring_add(&self, session: u32, port: u32) {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        p.mirror.insert(session, port);
        self.replication.config.store(Arc::new(p));
    }

    pub fn mirroring_delete(&self, session: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        p.mirror
            .remove(&session)
            .ok_or_else(|| format!("no mirror session {session}"))?;
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    pub fn pre(&self) -> Arc<Pre> {
        self.replication.config.load_full()
    }

    pub fn mc_group_create(&self, grp: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        if p.groups.contains_key(&grp) {
            return Err(format!("multicast group {grp} already exists"));
        }
        p.groups.insert(grp, vec![]);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    pub fn mc_group_delete(&self, grp: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let old = p
            .groups
            .remove(&grp)
            .ok_or_else(|| format!("no multicast group {grp}"))?;
        p.release_nodes(&old);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    /// Create a replication node; returns its handle (0, 1, 2, ... in creation order).
    pub fn mc_node_create(&self, rid: u32, ports: Vec<u32>) -> u32 {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let h = p.add_node(rid, ports);
        self.replication.config.store(Arc::new(p));
        h
    }

    pub fn mc_node_associate(&self, grp: u32, node: u32) -> Result<(), String> {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        if !matches!(p.nodes.get(node as usize), Some(Some(_))) {
            return Err(format!("no replication node {node}"));
        }
        p.groups
            .get_mut(&grp)
            .ok_or_else(|| format!("no multicast group {grp}"))?
            .push(node);
        self.replication.config.store(Arc::new(p));
        Ok(())
    }

    /// Replace a multicast group's replicas with `(rid, port)` pairs (the P4Runtime view of the
    /// PRE).
    pub fn mc_group_set(&self, grp: u32, replicas: &[(u32, u32)]) {
        let _g = self
            .replication
            .write
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut p = (**self.replication.config.load()).clone();
        let old = p.groups.remove(&grp).unwrap_or_default();
        p.release_nodes(&old);
        let handles = replicas
            .iter()
            .map(|(rid, port)| p.add_node(*rid, vec![*port]))
            .collect();
        p.groups.insert(grp, handles);
        self.replication.config.store(Arc::new(p));
    }
}
