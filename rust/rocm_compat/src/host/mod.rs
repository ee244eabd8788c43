//! The `cpu` platform: every CUDA-named item emulated on the host (see each module). NCCL's names
//! (`nccl.rs`) adapt the `host_collectives` crate's communicator.
mod bridge;
mod nccl;
pub(crate) mod pages;
mod runtime;

pub use bridge::*;
pub use nccl::*;
pub use runtime::*;
