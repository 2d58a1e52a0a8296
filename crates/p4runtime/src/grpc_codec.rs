//! The gRPC codec of the P4Runtime service: prost's encoding and decoding, except that a request
//! body that does not decode as its message is INVALID_ARGUMENT (the P4Runtime specification's code
//! for a malformed request) with the message type and prost's reason, where tonic's own
//! `ProstCodec` answers INTERNAL. The generated service and client use it through tonic-build's
//! `codec_path` (see build.rs).

use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, ProstCodec};
use tonic::Status;

/// prost's codec with decode errors mapped to INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct P4Codec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for P4Codec<T, U> {
    fn default() -> Self {
        P4Codec { _pd: PhantomData }
    }
}

impl<T, U> Codec for P4Codec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = P4Decoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        P4Decoder { _pd: PhantomData }
    }
}

/// Decodes a `U`; a body that is not one is INVALID_ARGUMENT naming the message type.
#[derive(Debug, Clone)]
pub struct P4Decoder<U> {
    _pd: PhantomData<U>,
}

/// The message's name without its Rust module path (`p4.v1.WriteRequest` → `WriteRequest`).
fn message_name<U>() -> &'static str {
    let full = std::any::type_name::<U>();
    full.rsplit("::").next().unwrap_or(full)
}

impl<U: prost::Message + Default> Decoder for P4Decoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            Status::invalid_argument(format!(
                "the request does not decode as a {}: {e}",
                message_name::<U>()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_drop_the_module_path() {
        assert_eq!(
            message_name::<crate::proto::p4::v1::WriteRequest>(),
            "WriteRequest"
        );
    }
}
