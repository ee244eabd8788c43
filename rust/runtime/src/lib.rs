//! `monarch_runtime._native`: the Python extension. Platform-neutral: it speaks CUDA names through
//! `rocm_compat`, which binds them to CUDA, HIP or the host emulation.
use std::sync::Arc;

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

pub mod comm;
pub mod error;
pub mod gpu;
pub mod memory;
pub mod transfer;

use error::Error;

pyo3::create_exception!(
    _native,
    MonarchError,
    PyException,
    "Base class of every monarch_runtime error."
);
pyo3::create_exception!(
    _native,
    NoDeviceError,
    MonarchError,
    "No usable GPU: no driver, no device, or a driver too old."
);
pyo3::create_exception!(
    _native,
    CollectiveError,
    MonarchError,
    "An NCCL/RCCL call failed, or the library could not be loaded. `.result` is the ncclResult_t (or None)."
);
pyo3::create_exception!(
    _native,
    CommunicatorAborted,
    CollectiveError,
    "The communicator was aborted (or destroyed) by this process; create a new one."
);
pyo3::create_exception!(
    _native,
    TransferAborted,
    CollectiveError,
    "A state transfer was interrupted (abort, peer failure); the receiver's buffers are unchanged."
);
pyo3::create_exception!(
    _native,
    TransferError,
    MonarchError,
    "Donor and receiver disagree about the state (names, sizes, staging size)."
);
pyo3::create_exception!(
    _native,
    ChecksumMismatch,
    TransferError,
    "Buffers whose checksum on arrival differs from the donor's; `.buffers` names them."
);

fn with_result(py: Python<'_>, err: PyErr, result: Option<i32>) -> PyErr {
    let _ = err.value(py).setattr("result", result);
    let _ = err
        .value(py)
        .setattr("result_name", result.map(rocm_compat::nccl::result_name));
    err
}

fn to_py(err: Error) -> PyErr {
    Python::attach(|py| match err {
        // The runtime's own name first (hipErrorNoDevice on ROCm), then the CUDA name it maps to.
        Error::Cuda(e) if e.is_no_device() => NoDeviceError::new_err(format!(
            "no usable GPU ({}): {}. The {} build needs a driver and a device.",
            if e.platform_name == e.name {
                e.name.clone()
            } else {
                format!("{}, CUDA's {}", e.platform_name, e.name)
            },
            e.message,
            rocm_compat::PLATFORM
        )),
        Error::Cuda(e) => MonarchError::new_err(e.to_string()),
        Error::Collective(msg) => with_result(py, CollectiveError::new_err(msg), None),
        Error::Nccl {
            result, message, ..
        } => with_result(py, CollectiveError::new_err(message), Some(result)),
        Error::Aborted(msg) => with_result(py, CommunicatorAborted::new_err(msg), None),
        Error::Kernel(msg) => MonarchError::new_err(msg),
        Error::Value(msg) => PyValueError::new_err(msg),
        Error::Transfer(msg) => TransferError::new_err(msg),
        Error::Checksum { buffers, message } => {
            let err = ChecksumMismatch::new_err(message);
            let _ = err.value(py).setattr("buffers", buffers);
            err
        }
        Error::TransferAborted { message, result } => {
            with_result(py, TransferAborted::new_err(message), result)
        }
        Error::Python(e) => e,
    })
}

/// Number of visible GPUs. The CPU build has none (0); a GPU build without a driver or device
/// raises NoDeviceError naming the cause.
#[pyfunction]
fn device_count() -> PyResult<i32> {
    memory::device_count().map_err(to_py)
}

fn properties_dict<'py>(
    py: Python<'py>,
    p: &rocm_compat::device::DeviceProperties,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &p.name)?;
    d.set_item("arch", &p.arch)?;
    d.set_item("major", p.major)?;
    d.set_item("minor", p.minor)?;
    d.set_item("warp_size", p.warp_size)?;
    d.set_item("multiprocessors", p.multiprocessors)?;
    d.set_item("total_memory", p.total_memory)?;
    Ok(d)
}

/// Properties of one device as a dict: name, arch, warp_size, total_memory, multiprocessors.
#[pyfunction]
fn device_properties(py: Python<'_>, device: i32) -> PyResult<Py<PyDict>> {
    let p = rocm_compat::device::properties(device).map_err(|e| to_py(Error::Cuda(e)))?;
    Ok(properties_dict(py, &p)?.unbind())
}

/// Every visible device: index, name, arch, warp_size, total_memory, free_memory, ...
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<Vec<Py<PyDict>>> {
    let list = py.detach(memory::devices).map_err(to_py)?;
    list.iter()
        .map(|info| {
            let d = properties_dict(py, &info.properties)?;
            d.set_item("index", info.index)?;
            d.set_item("total_memory", info.total_memory)?;
            d.set_item("free_memory", info.free_memory)?;
            Ok(d.unbind())
        })
        .collect()
}

/// mr-sum64 of `data`, computed by the bridge's kernel on the device (the host on the CPU build).
#[pyfunction]
fn checksum(py: Python<'_>, data: Vec<u8>) -> PyResult<u64> {
    py.detach(|| gpu::checksum(&data)).map_err(to_py)
}

/// mr-sum64 of `data`, computed by the host reference implementation.
#[pyfunction]
fn checksum_reference(data: Vec<u8>) -> u64 {
    rocm_compat::checksum::reference(&data)
}

/// The collective library: its soname, whether it loads, its version (e.g. 23203) or the reason.
#[pyfunction]
fn collective_info(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let info = gpu::collective_info();
    let d = PyDict::new(py);
    d.set_item("library", info.library)?;
    d.set_item("loaded", info.loaded)?;
    d.set_item("version", info.version)?;
    d.set_item("error", info.error)?;
    Ok(d.unbind())
}

/// Sum-all-reduce of float32 values on one rank of device 0 through the loaded NCCL/RCCL library
/// (a smoke test of the library path; the CPU build has no library).
#[pyfunction]
fn all_reduce_single_rank(py: Python<'_>, values: Vec<f32>) -> PyResult<Vec<f32>> {
    py.detach(|| gpu::all_reduce_single_rank(&values))
        .map_err(to_py)
}

/// Names of the kernels registered in csrc/manifest.toml and linked into this build.
#[pyfunction]
fn kernels() -> Vec<String> {
    gpu::kernel_names()
}

/// Runs the registered kernel `name` in place on a device copy of `data`; returns the bytes after it.
#[pyfunction]
fn launch_kernel(py: Python<'_>, name: String, data: Vec<u8>) -> PyResult<Vec<u8>> {
    py.detach(|| gpu::launch_kernel(&name, &data))
        .map_err(to_py)
}

/// Device memory (host memory on the CPU build), zero-filled.
#[pyclass(frozen, subclass, module = "monarch_runtime._native", name = "Buffer")]
struct PyBuffer {
    inner: Arc<memory::Buffer>,
}

#[pymethods]
impl PyBuffer {
    #[new]
    #[pyo3(signature = (nbytes, device=None))]
    fn new(py: Python<'_>, nbytes: usize, device: Option<i32>) -> PyResult<Self> {
        let inner = py
            .detach(|| memory::Buffer::new(nbytes, device))
            .map_err(to_py)?;
        Ok(PyBuffer {
            inner: Arc::new(inner),
        })
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }

    fn __len__(&self) -> usize {
        self.inner.nbytes()
    }

    /// Copies `data` (bytes) into the buffer at `offset`.
    #[pyo3(signature = (data, offset=0))]
    fn _write(&self, py: Python<'_>, data: &[u8], offset: usize) -> PyResult<()> {
        py.detach(|| self.inner.write(offset, data)).map_err(to_py)
    }

    /// `nbytes` bytes from `offset` (to the end when None) as bytes.
    #[pyo3(signature = (offset=0, nbytes=None))]
    fn _read<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let len = nbytes.unwrap_or_else(|| self.inner.nbytes().saturating_sub(offset));
        let mut out = vec![0u8; len];
        py.detach(|| self.inner.read(offset, &mut out))
            .map_err(to_py)?;
        Ok(PyBytes::new(py, &out))
    }

    /// Device-to-device copy of `nbytes` bytes (all of `src` when None) from `src` at `src_offset`.
    #[pyo3(signature = (src, offset=0, src_offset=0, nbytes=None))]
    fn copy_from_buffer(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyBuffer>,
        offset: usize,
        src_offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<()> {
        let src = Arc::clone(&src.get().inner);
        let len = nbytes.unwrap_or_else(|| src.nbytes().saturating_sub(src_offset));
        py.detach(|| self.inner.copy_from(offset, &src, src_offset, len))
            .map_err(to_py)
    }

    /// Sets every byte to `value`.
    #[pyo3(signature = (value=0))]
    fn fill(&self, py: Python<'_>, value: u8) -> PyResult<()> {
        py.detach(|| self.inner.fill(value)).map_err(to_py)
    }

    /// mr-sum64 of the buffer by the device kernel (the host reference on the CPU build).
    #[pyo3(signature = (stream=None))]
    fn checksum(&self, py: Python<'_>, stream: Option<&Bound<'_, PyStream>>) -> PyResult<u64> {
        let stream = stream.map(|s| Arc::clone(&s.get().inner));
        py.detach(|| self.inner.checksum(stream.as_deref()))
            .map_err(to_py)
    }
}

/// A stream; work on the CPU build is synchronous.
#[pyclass(frozen, module = "monarch_runtime._native", name = "Stream")]
struct PyStream {
    inner: Arc<memory::Stream>,
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (device=None))]
    fn new(device: Option<i32>) -> PyResult<Self> {
        Ok(PyStream {
            inner: Arc::new(memory::Stream::new(device).map_err(to_py)?),
        })
    }

    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }

    /// Blocks until the stream's work is done.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).map_err(to_py)
    }
}

/// An event: `record` on a stream, `synchronize`, `elapsed_time(end)` in milliseconds.
#[pyclass(frozen, module = "monarch_runtime._native", name = "Event")]
struct PyEvent {
    inner: memory::Event,
}

#[pymethods]
impl PyEvent {
    #[new]
    #[pyo3(signature = (device=None))]
    fn new(device: Option<i32>) -> PyResult<Self> {
        Ok(PyEvent {
            inner: memory::Event::new(device).map_err(to_py)?,
        })
    }

    /// Records the event on `stream` (the default stream when None).
    #[pyo3(signature = (stream=None))]
    fn record(&self, stream: Option<&Bound<'_, PyStream>>) -> PyResult<()> {
        self.inner
            .record(stream.map(|s| &*s.get().inner))
            .map_err(to_py)
    }

    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).map_err(to_py)
    }

    /// Milliseconds from this event to `end`.
    fn elapsed_time(&self, end: &Bound<'_, PyEvent>) -> PyResult<f32> {
        self.inner.elapsed_ms(&end.get().inner).map_err(to_py)
    }
}

fn buffer_of(obj: &Bound<'_, PyAny>) -> PyResult<Arc<memory::Buffer>> {
    let b = obj.cast::<PyBuffer>().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a monarch_runtime.Buffer, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    Ok(Arc::clone(&b.get().inner))
}

/// One rank of a communicator (NCCL on CUDA, RCCL on ROCm, threads of this process on CPU).
#[pyclass(
    frozen,
    subclass,
    module = "monarch_runtime._native",
    name = "Communicator"
)]
struct PyCommunicator {
    inner: Arc<comm::Communicator>,
}

#[pymethods]
impl PyCommunicator {
    /// Joins communicator `unique_id` as `rank` of `world_size` on `device`; blocks (GIL released)
    /// until every rank has joined.
    #[new]
    #[pyo3(signature = (unique_id, world_size, rank, device=None))]
    fn new(
        py: Python<'_>,
        unique_id: Vec<u8>,
        world_size: i32,
        rank: i32,
        device: Option<i32>,
    ) -> PyResult<Self> {
        let inner = py
            .detach(|| comm::Communicator::new(&unique_id, world_size, rank, device))
            .map_err(to_py)?;
        Ok(PyCommunicator {
            inner: Arc::new(inner),
        })
    }

    /// A fresh 128-byte unique id (ncclGetUniqueId); give the same one to every rank.
    #[staticmethod]
    fn unique_id<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let id = comm::unique_id().map_err(to_py)?;
        Ok(PyBytes::new(py, &id))
    }

    #[getter]
    fn rank(&self) -> i32 {
        self.inner.rank()
    }
    #[getter]
    fn world_size(&self) -> i32 {
        self.inner.world_size()
    }
    #[getter]
    fn device(&self) -> i32 {
        self.inner.device()
    }
    #[getter]
    fn aborted(&self) -> bool {
        self.inner.is_aborted()
    }
    #[getter]
    fn live(&self) -> bool {
        self.inner.is_live()
    }

    /// In-place all-reduce of `buffer` viewed as `dtype` elements (f32, f16, bf16, i32) with `op`
    /// (sum, max, min, avg).
    #[pyo3(signature = (buffer, op="sum", dtype="f32"))]
    fn all_reduce(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        op: &str,
        dtype: &str,
    ) -> PyResult<()> {
        let b = buffer_of(buffer)?;
        let dtype = comm::parse_dtype(dtype).map_err(to_py)?;
        let op = comm::parse_op(op).map_err(to_py)?;
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.all_reduce(&b, dtype, op))
            .map_err(to_py)
    }

    /// In-place broadcast of `buffer` from rank `root`.
    #[pyo3(signature = (buffer, root=0))]
    fn broadcast(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, root: i32) -> PyResult<()> {
        let b = buffer_of(buffer)?;
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.broadcast(&b, root)).map_err(to_py)
    }

    /// Sends `nbytes` bytes of `buffer` (all when None) from `offset` to rank `peer`.
    #[pyo3(signature = (buffer, peer, offset=0, nbytes=None))]
    fn send(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        peer: i32,
        offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<()> {
        let b = buffer_of(buffer)?;
        let len = nbytes.unwrap_or_else(|| b.nbytes().saturating_sub(offset));
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.send(&b, offset, len, peer))
            .map_err(to_py)
    }

    /// Receives `nbytes` bytes (all of `buffer` when None) from rank `peer` into `buffer` at `offset`.
    #[pyo3(signature = (buffer, peer, offset=0, nbytes=None))]
    fn recv(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        peer: i32,
        offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<()> {
        let b = buffer_of(buffer)?;
        let len = nbytes.unwrap_or_else(|| b.nbytes().saturating_sub(offset));
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.recv(&b, offset, len, peer))
            .map_err(to_py)
    }

    /// Returns when every rank has called it.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.barrier()).map_err(to_py)
    }

    /// ncclCommAbort: frees operations blocked on this communicator in any thread, and peers
    /// waiting on this rank see an error. Idempotent; the communicator is unusable afterwards.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.abort()).map_err(to_py)
    }

    /// ncclCommDestroy (also done when the object is collected). Idempotent.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.destroy()).map_err(to_py)
    }

    /// Streams `buffers` (name -> Buffer, in order) from rank `donor` to rank `receiver` in chunks of
    /// at most `staging_bytes`; see monarch_runtime.transfer_state.
    #[pyo3(signature = (buffers, donor, receiver, staging_bytes, progress=None, shadow="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn _transfer_state<'py>(
        &self,
        py: Python<'py>,
        buffers: Vec<(String, Bound<'py, PyAny>)>,
        donor: i32,
        receiver: i32,
        staging_bytes: usize,
        progress: Option<Py<PyAny>>,
        shadow: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let shadow = transfer::parse_shadow(shadow).map_err(to_py)?;
        let owned: Vec<(String, Arc<memory::Buffer>)> = buffers
            .iter()
            .map(|(n, b)| Ok((n.clone(), buffer_of(b)?)))
            .collect::<PyResult<_>>()?;
        let inner = Arc::clone(&self.inner);
        let report = py
            .detach(move || {
                let refs: Vec<(String, &memory::Buffer)> =
                    owned.iter().map(|(n, b)| (n.clone(), &**b)).collect();
                let mut callback = |name: &str, offset: usize, len: usize| -> error::Result<()> {
                    match &progress {
                        None => Ok(()),
                        Some(f) => Python::attach(|py| {
                            f.call1(py, (name, offset, len))
                                .map(|_| ())
                                .map_err(Error::Python)
                        }),
                    }
                };
                transfer::transfer_state(
                    &inner,
                    &refs,
                    donor,
                    receiver,
                    staging_bytes,
                    shadow,
                    &mut callback,
                )
            })
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("role", report.role)?;
        d.set_item("shadow", report.shadow)?;
        d.set_item("peer", report.peer)?;
        d.set_item("buffers", report.buffers)?;
        d.set_item("bytes", report.bytes)?;
        d.set_item("chunks", report.chunks)?;
        d.set_item("chunk_bytes", report.chunk_bytes)?;
        d.set_item("seconds", report.seconds)?;
        let sums = PyDict::new(py);
        for (name, sum) in report.checksums {
            sums.set_item(name, sum)?;
        }
        d.set_item("checksums", sums)?;
        Ok(d)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PLATFORM", rocm_compat::PLATFORM)?;
    m.add("MonarchError", py.get_type::<MonarchError>())?;
    m.add("NoDeviceError", py.get_type::<NoDeviceError>())?;
    m.add("CollectiveError", py.get_type::<CollectiveError>())?;
    m.add("CommunicatorAborted", py.get_type::<CommunicatorAborted>())?;
    m.add("TransferAborted", py.get_type::<TransferAborted>())?;
    m.add("TransferError", py.get_type::<TransferError>())?;
    m.add("ChecksumMismatch", py.get_type::<ChecksumMismatch>())?;
    m.add_class::<PyBuffer>()?;
    m.add_class::<PyStream>()?;
    m.add_class::<PyEvent>()?;
    m.add_class::<PyCommunicator>()?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(checksum, m)?)?;
    m.add_function(wrap_pyfunction!(checksum_reference, m)?)?;
    m.add_function(wrap_pyfunction!(collective_info, m)?)?;
    m.add_function(wrap_pyfunction!(all_reduce_single_rank, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(launch_kernel, m)?)?;
    Ok(())
}
