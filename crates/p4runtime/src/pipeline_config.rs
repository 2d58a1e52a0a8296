//! SetForwardingPipelineConfig on the service: VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT
//! and RECONCILE_AND_COMMIT (`reconcile.rs`) of a new pipeline.

use crate::callers::Caller;
use crate::proto::p4::v1 as p4;
use crate::server::Service;
use std::sync::Arc;
use tonic::{Response, Status};

impl Service {
    pub(crate) fn set_pipeline(
        &self,
        r: p4::SetForwardingPipelineConfigRequest,
        caller: &Caller,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(r.device_id)?;
        self.check_primary(&r.election_id, caller)?;
        let action = A::try_from(r.action).unwrap_or(A::Unspecified);
        if action == A::Commit {
            // realize the config saved by VERIFY_AND_SAVE (state starts empty, as for
            // VERIFY_AND_COMMIT)
            let saved = self
                .device
                .saved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            return match saved {
                Some(p) => {
                    self.device
                        .digest_configs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clear();
                    self.device.digest_cache_clear();
                    *self
                        .device
                        .pipeline
                        .write()
                        .unwrap_or_else(|p| p.into_inner()) = Some(p);
                    Ok(Response::new(Default::default()))
                }
                None => Err(Status::failed_precondition(
                    "nothing to commit: no config was saved with VERIFY_AND_SAVE",
                )),
            };
        }
        if action == A::Unspecified {
            return Err(Status::invalid_argument(
                "unspecified pipeline config action",
            ));
        }
        let config = r
            .config
            .ok_or_else(|| Status::invalid_argument("missing config"))?;
        let p4info = config
            .p4info
            .ok_or_else(|| Status::invalid_argument("missing p4info"))?;
        let cookie = config.cookie.map(|c| c.cookie).unwrap_or(0);
        let new = self
            .device
            .build_pipeline(config.p4_device_config, Some(p4info), cookie)
            .map_err(Status::invalid_argument)?;
        if matches!(action, A::Verify) {
            return Ok(Response::new(Default::default()));
        }
        let new = Arc::new(new);
        match action {
            A::VerifyAndSave => {
                *self.device.saved.lock().unwrap_or_else(|p| p.into_inner()) = Some(new);
                return Ok(Response::new(Default::default()));
            }
            A::ReconcileAndCommit => {
                let old = self.pipeline()?;
                let _writing = self.device.writes.lock().unwrap_or_else(|p| p.into_inner());
                crate::reconcile::reconcile(&old.engine, &new.engine)?;
                let ids: Vec<u32> = new.engine.prog.digests.iter().map(|d| d.id).collect();
                self.device
                    .digest_configs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|id, _| ids.contains(id));
            }
            _ => self
                .device
                .digest_configs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear(),
        }
        self.device.digest_cache_clear();
        *self.device.saved.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self
            .device
            .pipeline
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(new);
        Ok(Response::new(Default::default()))
    }
}
