//! The `cpu` platform: every CUDA-named item emulated on the host (see each module).
mod bridge;
mod nccl;
mod net;
pub(crate) mod pages;
mod runtime;

pub use bridge::*;
pub use nccl::*;
pub use runtime::*;
