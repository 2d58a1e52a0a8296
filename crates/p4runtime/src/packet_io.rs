//! Packet-in and packet-out on the P4Runtime device: frames the pipeline sends to the CPU port go to
//! the primary controller with their `packet_in` header as metadata; PacketOut messages are encoded
//! with their `packet_out` header and queued for the data plane.

use crate::codec::{bytes_to_value, read_field, value_to_bytes, write_field};
use crate::device::Device;
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_ir::Program;
use tonic::Status;

impl Device {
    /// A frame the pipeline sent to the CPU port: strip the `packet_in` controller header (if the
    /// program has one) into metadata and hand it to the primary controller.
    pub fn packet_in(&self, engine: &Engine, frame: &[u8]) {
        let mut metadata = vec![];
        let mut payload = frame;
        if let Some(h) = engine
            .prog
            .controller_headers
            .iter()
            .find(|h| h.name == "packet_in")
        {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let n = bits.div_ceil(8) as usize;
            if frame.len() < n {
                self.packet_in_dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let mut pos = 0usize;
            for (_, id, w) in &h.fields {
                let v = read_field(&frame[..n], pos, *w);
                metadata.push(p4::PacketMetadata {
                    metadata_id: *id,
                    value: value_to_bytes(&v),
                });
                pos += *w as usize;
            }
            payload = &frame[n..];
        }
        let translator = self
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|p| p.translator.clone());
        if let Some(tr) = translator {
            tr.packet_in(&mut metadata);
        }
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn {
                payload: payload.to_vec(),
                metadata,
            })),
        };
        let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
        let primary = a.primary();
        let sent = a
            .controllers
            .values()
            .find(|c| Some(c.election_id) == primary)
            .map(|c| c.tx.try_send(Ok(msg)).is_ok())
            .unwrap_or(false);
        if !sent {
            self.packet_in_dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Encode a PacketOut (the `packet_out` controller header from its metadata, then the payload)
    /// and queue it for the data plane.
    pub(crate) fn packet_out(&self, prog: &Program, po: &p4::PacketOut) -> Result<(), Status> {
        let mut frame = vec![];
        if let Some(h) = prog
            .controller_headers
            .iter()
            .find(|h| h.name == "packet_out")
        {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let mut hdr = vec![0u8; bits.div_ceil(8) as usize];
            let mut pos = 0usize;
            for (name, id, w) in &h.fields {
                let m = po
                    .metadata
                    .iter()
                    .find(|m| m.metadata_id == *id)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "packet-out metadata `{name}` (id {id}) is missing"
                        ))
                    })?;
                let v = bytes_to_value(&m.value, *w, name)?;
                write_field(&mut hdr, pos, *w, &v);
                pos += *w as usize;
            }
            if let Some(m) = po
                .metadata
                .iter()
                .find(|m| !h.fields.iter().any(|f| f.1 == m.metadata_id))
            {
                return Err(Status::invalid_argument(format!(
                    "packet-out metadata id {} is not in the packet_out header",
                    m.metadata_id
                )));
            }
            frame.extend_from_slice(&hdr);
        }
        frame.extend_from_slice(&po.payload);
        self.packet_out_tx
            .send(&frame)
            .map(|_| ())
            .map_err(|e| Status::resource_exhausted(format!("packet-out queue: {e}")))
    }
}
