//! The runtime's errors; `lib.rs` turns each into a named Python exception.
use std::fmt;

use rocm_compat::CudaError;

#[derive(Debug)]
pub enum Error {
    /// A CUDA/HIP runtime call failed (NoDeviceError when there is no usable GPU).
    Cuda(CudaError),
    /// The collective library could not be loaded, or another collective failure without a result code.
    Collective(String),
    /// An NCCL/RCCL call returned an error: the call, the `ncclResult_t` and the library's words.
    Nccl {
        call: &'static str,
        result: i32,
        message: String,
    },
    /// An NCCL/RCCL call failed where no GPU is usable: the library's answer and the device error
    /// (Python: CollectiveNoDeviceError, both a CollectiveError and a NoDeviceError).
    NcclNoDevice {
        result: i32,
        message: String,
        device: CudaError,
    },
    /// The operation ran on (or was interrupted by) a communicator this process aborted or destroyed.
    Aborted(String),
    /// A registered kernel is unknown or failed.
    Kernel(String),
    /// A bad argument (ValueError).
    Value(String),
    /// The donor and receiver do not agree on the state (names, sizes, staging).
    Transfer(String),
    /// Buffers whose checksum on arrival differs from the donor's.
    Checksum {
        buffers: Vec<String>,
        message: String,
    },
    /// A transfer interrupted by a collective failure or an abort; the receiver's state is unchanged.
    TransferAborted {
        message: String,
        result: Option<i32>,
    },
    /// An exception raised by a Python callback (re-raised as is).
    Python(pyo3::PyErr),
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        Error::Cuda(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cuda(e) => write!(f, "{e}"),
            Error::Nccl { message, .. } => f.write_str(message),
            Error::NcclNoDevice {
                message, device, ..
            } => write!(f, "{message}; {device}"),
            Error::Checksum { message, .. } | Error::TransferAborted { message, .. } => {
                f.write_str(message)
            }
            Error::Collective(m)
            | Error::Aborted(m)
            | Error::Kernel(m)
            | Error::Value(m)
            | Error::Transfer(m) => f.write_str(m),
            Error::Python(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
