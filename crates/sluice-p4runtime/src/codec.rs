//! The gRPC codec of the P4Runtime service: prost's, except that a request
//! that does not decode is answered INVALID_ARGUMENT, as P4Runtime answers
//! every malformed request (prost's own codec answers INTERNAL, which says
//! the server failed). Encoding is prost's, unchanged.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The codec `build.rs` names for the generated service.
#[derive(Debug, Clone)]
pub struct P4rtCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for P4rtCodec<T, U> {
    fn default() -> Self {
        P4rtCodec(PhantomData)
    }
}

impl<T, U> Codec for P4rtCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = P4rtDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        P4rtDecoder(ProstCodec::<T, U>::default().decoder())
    }
}

/// prost's decoder with its errors answered INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct P4rtDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for P4rtDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| Status::invalid_argument(format!("undecodable message: {}", s.message())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
