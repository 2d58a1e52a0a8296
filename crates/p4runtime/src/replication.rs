//! P4Runtime's packet replication engine entries: multicast groups and clone sessions, written and
//! read through the engine's replication API.

use crate::codec::bytes_to_value;
use crate::indexed_entities::Up;
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use tonic::Status;

fn replica_port(r: &p4::Replica) -> Result<u32, Status> {
    match &r.port_kind {
        Some(p4::replica::PortKind::EgressPort(p)) => Ok(*p),
        // a byte string as the specification's "Bytestrings" rules read it (of at most 32 bits)
        Some(p4::replica::PortKind::Port(b)) => {
            Ok(bytes_to_value(b, 32, "replica port")?.words[0] as u32)
        }
        None => Err(Status::invalid_argument("replica without a port")),
    }
}

pub fn write_pre(e: &Engine, ty: Up, p: &p4::PacketReplicationEngineEntry) -> Result<(), Status> {
    use p4::packet_replication_engine_entry::Type as T;
    let pre = e.pre();
    match &p.r#type {
        Some(T::MulticastGroupEntry(g)) => {
            let id = g.multicast_group_id;
            if id == 0 {
                return Err(Status::invalid_argument(
                    "multicast group 0 is reserved (no multicast)",
                ));
            }
            let exists = pre.groups.contains_key(&id);
            match ty {
                Up::Insert if exists => Err(Status::already_exists(format!(
                    "multicast group {id} exists"
                ))),
                Up::Modify | Up::Delete if !exists => {
                    Err(Status::not_found(format!("no multicast group {id}")))
                }
                Up::Delete => e.mc_group_delete(id).map_err(Status::invalid_argument),
                Up::Insert | Up::Modify => {
                    let mut replicas = vec![];
                    for r in &g.replicas {
                        let port = replica_port(r)?;
                        if replicas.contains(&(r.instance, port)) {
                            return Err(Status::invalid_argument(format!("multicast group {id}: replica (port {port}, instance {}) given twice", r.instance)));
                        }
                        replicas.push((r.instance, port));
                    }
                    e.mc_group_set(id, &replicas);
                    Ok(())
                }
                Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
            }
        }
        Some(T::CloneSessionEntry(c)) => {
            let id = c.session_id;
            let exists = pre.mirror.contains_key(&id);
            match ty {
                Up::Insert if exists => {
                    Err(Status::already_exists(format!("clone session {id} exists")))
                }
                Up::Modify | Up::Delete if !exists => {
                    Err(Status::not_found(format!("no clone session {id}")))
                }
                Up::Delete => e.mirroring_delete(id).map_err(Status::invalid_argument),
                Up::Insert | Up::Modify => {
                    if c.replicas.len() != 1 {
                        return Err(Status::unimplemented(format!(
                            "clone session {id}: exactly one replica is supported, got {}",
                            c.replicas.len()
                        )));
                    }
                    if c.packet_length_bytes != 0 {
                        return Err(Status::unimplemented(
                            "clone sessions truncating packets are not supported",
                        ));
                    }
                    e.mirroring_add(id, replica_port(&c.replicas[0])?);
                    Ok(())
                }
                Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
            }
        }
        None => Err(Status::invalid_argument(
            "packet replication entry without a type",
        )),
    }
}

pub fn read_pre(
    e: &Engine,
    p: &p4::PacketReplicationEngineEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use p4::packet_replication_engine_entry::Type as T;
    let pre = e.pre();
    let wrap = |t: T| p4::Entity {
        entity: Some(p4::entity::Entity::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry { r#type: Some(t) },
        )),
    };
    match &p.r#type {
        Some(T::MulticastGroupEntry(g)) => {
            for (id, handles) in &pre.groups {
                if g.multicast_group_id != 0 && *id != g.multicast_group_id {
                    continue;
                }
                let mut replicas = vec![];
                for h in handles {
                    if let Some(Some((rid, ports))) = pre.nodes.get(*h as usize) {
                        for port in ports {
                            replicas.push(p4::Replica {
                                instance: *rid,
                                port_kind: Some(p4::replica::PortKind::EgressPort(*port)),
                            });
                        }
                    }
                }
                out.push(wrap(T::MulticastGroupEntry(p4::MulticastGroupEntry {
                    multicast_group_id: *id,
                    replicas,
                    metadata: vec![],
                })));
            }
            Ok(())
        }
        Some(T::CloneSessionEntry(c)) => {
            for (id, port) in &pre.mirror {
                if c.session_id != 0 && *id != c.session_id {
                    continue;
                }
                out.push(wrap(T::CloneSessionEntry(p4::CloneSessionEntry {
                    session_id: *id,
                    replicas: vec![p4::Replica {
                        instance: 0,
                        port_kind: Some(p4::replica::PortKind::EgressPort(*port)),
                    }],
                    class_of_service: 0,
                    packet_length_bytes: 0,
                })));
            }
            Ok(())
        }
        None => Err(Status::invalid_argument(
            "packet replication entry without a type",
        )),
    }
}
