//! `monarch_runtime._native`: the Python extension. Platform-neutral: it speaks CUDA names through
//! `rocm_compat`, which binds them to CUDA, HIP or the host emulation.
use std::sync::Arc;

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

pub mod comm;
pub mod dlpack;
pub mod error;
pub mod gpu;
pub mod memory;
pub mod transfer;

use error::Error;

/// `CollectiveNoDeviceError(CollectiveError, NoDeviceError)`: a collective call failed where no GPU is
/// usable. Both bases, so code that catches either sees it; made once, with two bases, which
/// `create_exception!` cannot express.
static COLLECTIVE_NO_DEVICE: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> =
    pyo3::sync::PyOnceLock::new();

fn collective_no_device_type(py: Python<'_>) -> PyResult<&Bound<'_, pyo3::types::PyType>> {
    COLLECTIVE_NO_DEVICE
        .get_or_try_init(py, || {
            let bases = (py.get_type::<CollectiveError>(), py.get_type::<NoDeviceError>());
            let namespace = PyDict::new(py);
            namespace.set_item("__module__", "monarch_runtime._native")?;
            namespace.set_item(
                "__doc__",
                "A collective (NCCL/RCCL) call failed where no GPU is usable: `.result` is what the \
                 library answered; it is a CollectiveError and a NoDeviceError.",
            )?;
            let made = py
                .import("builtins")?
                .getattr("type")?
                .call1(("CollectiveNoDeviceError", bases, namespace))?;
            Ok::<_, PyErr>(made.cast_into::<pyo3::types::PyType>()?.unbind())
        })
        .map(|ty| ty.bind(py))
}

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

/// The runtime's own name for a device error (hipErrorNoDevice on ROCm), then the CUDA name it maps to.
fn device_names(e: &rocm_compat::CudaError) -> String {
    if e.platform_name == e.name {
        e.name.clone()
    } else {
        format!("{}, CUDA's {}", e.platform_name, e.name)
    }
}

fn to_py(err: Error) -> PyErr {
    Python::attach(|py| match err {
        Error::Cuda(e) if e.is_no_device() => NoDeviceError::new_err(format!(
            "no usable GPU ({}): {}. The {} build needs a driver and a device.",
            device_names(&e),
            e.message,
            rocm_compat::PLATFORM
        )),
        Error::Cuda(e) => MonarchError::new_err(e.to_string()),
        Error::Collective(msg) => with_result(py, CollectiveError::new_err(msg), None),
        Error::Nccl {
            result, message, ..
        } => with_result(py, CollectiveError::new_err(message), Some(result)),
        Error::NcclNoDevice {
            result,
            message,
            device,
        } => {
            let text = format!(
                "{message}. No usable GPU ({}): {}. The {} build needs a driver and a device.",
                device_names(&device),
                device.message,
                rocm_compat::PLATFORM
            );
            let err = match collective_no_device_type(py) {
                Ok(ty) => PyErr::from_type(ty.clone(), text),
                Err(e) => e,
            };
            with_result(py, err, Some(result))
        }
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

/// Device memory (host memory on the CPU build), zero-filled; or a DLPack producer's tensor,
/// wrapped without a copy (`_dlpack=`, see monarch_runtime.from_dlpack).
#[pyclass(frozen, subclass, module = "monarch_runtime._native", name = "Buffer")]
struct PyBuffer {
    inner: Arc<memory::Buffer>,
    meta: dlpack::Meta,
    /// The producer a wrapped tensor came from, kept alive with the buffer.
    owner: Option<Py<PyAny>>,
}

impl PyBuffer {
    fn plain(inner: memory::Buffer) -> Self {
        let meta = dlpack::Meta::bytes(inner.nbytes());
        PyBuffer {
            inner: Arc::new(inner),
            meta,
            owner: None,
        }
    }
}

#[pymethods]
impl PyBuffer {
    #[new]
    #[pyo3(signature = (nbytes=None, device=None, *, _dlpack=None))]
    fn new(
        py: Python<'_>,
        nbytes: Option<usize>,
        device: Option<i32>,
        _dlpack: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if let Some(producer) = _dlpack {
            if nbytes.is_some() || device.is_some() {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "a buffer wrapping a DLPack tensor takes its size and device from the tensor",
                ));
            }
            let imported = dlpack::import(&producer)?;
            return Ok(PyBuffer {
                inner: Arc::new(imported.buffer),
                meta: imported.meta,
                owner: Some(producer.unbind()),
            });
        }
        let nbytes = nbytes.ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(
                "Buffer(nbytes, device=None): nbytes is required",
            )
        })?;
        let inner = py
            .detach(|| memory::Buffer::new(nbytes, device))
            .map_err(to_py)?;
        Ok(PyBuffer::plain(inner))
    }

    /// The element type: the wrapped tensor's (numpy/torch spelling), "uint8" for a plain buffer.
    #[getter]
    fn dtype(&self) -> String {
        self.meta.dtype.name().unwrap_or_else(|_| "uint8".into())
    }

    /// The wrapped tensor's shape; (nbytes,) for a plain buffer.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        pyo3::types::PyTuple::new(py, &self.meta.shape)
    }

    /// Whether the memory is read-only (a read-only array or tensor): it cannot be written.
    #[getter]
    fn read_only(&self) -> bool {
        self.inner.is_read_only()
    }

    /// Whether the buffer wraps a producer's memory (from_dlpack) rather than its own.
    #[getter]
    fn is_view(&self) -> bool {
        self.inner.is_external()
    }

    /// The address of the first byte (device memory on GPU builds).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.inner.at(0) as usize
    }

    /// The producer a wrapped tensor came from (None for a plain buffer).
    #[getter]
    fn owner(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.owner.as_ref().map(|o| o.clone_ref(py))
    }

    /// DLPack export: a capsule of this buffer's memory, no copy (with `copy=True`, of a copy).
    /// Versioned (DLPack 1.x) when `max_version` allows it, else the legacy form.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // every operation of a Buffer has completed when it returns
        let here = dlpack::device_of(&self.inner);
        if let Some(wanted) = dl_device {
            if wanted != here {
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "the buffer is on DLPack device {here:?}, not {wanted:?}: copy it there first"
                )));
            }
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        if copy == Some(true) {
            let src = Arc::clone(&self.inner);
            let dup = py
                .detach(|| {
                    let b = memory::Buffer::new(src.nbytes(), Some(src.device()))?;
                    b.copy_from(0, &src, 0, src.nbytes())?;
                    Ok::<_, Error>(b)
                })
                .map_err(to_py)?;
            return dlpack::export(py, Arc::new(dup), &self.meta, versioned, true);
        }
        dlpack::export(py, Arc::clone(&self.inner), &self.meta, versioned, false)
    }

    /// (DLPack device type, device id): kDLCPU (1) on the CPU build, kDLCUDA (2), kDLROCM (10).
    fn __dlpack_device__(&self) -> (i32, i32) {
        dlpack::device_of(&self.inner)
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

fn reduce_dtype(obj: &Bound<'_, PyAny>, dtype: Option<&str>) -> PyResult<comm::DataType> {
    if let Some(name) = dtype {
        return comm::parse_dtype(name).map_err(to_py);
    }
    match obj.cast::<PyBuffer>() {
        Ok(b) if b.get().meta.typed => {
            let name = b.get().meta.dtype.name().unwrap_or_default();
            comm::parse_dtype(&name).map_err(|_| {
                PyValueError::new_err(format!(
                    "a {name} tensor cannot be reduced: the collectives handle float32, float16, bfloat16 and \
                     int32 (pass dtype= to reinterpret the bytes)"
                ))
            })
        }
        _ => comm::parse_dtype("f32").map_err(to_py),
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
    /// (sum, max, min, avg). dtype None: a wrapped tensor's own, f32 for a plain buffer.
    #[pyo3(signature = (buffer, op="sum", dtype=None))]
    fn all_reduce(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        op: &str,
        dtype: Option<&str>,
    ) -> PyResult<()> {
        let b = buffer_of(buffer)?;
        let dtype = reduce_dtype(buffer, dtype)?;
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
        // A Buffer is a tensor leaf (its dtype and shape go in the manifest); bytes are a value leaf.
        enum Owned {
            Tensor(Arc<memory::Buffer>, String, Vec<i64>),
            Value(Vec<u8>),
        }
        let owned: Vec<(String, Owned)> = buffers
            .iter()
            .map(|(n, b)| {
                if let Ok(bytes) = b.cast::<PyBytes>() {
                    return Ok((n.clone(), Owned::Value(bytes.as_bytes().to_vec())));
                }
                let inner = buffer_of(b)?;
                let (dtype, shape) = match b.cast::<PyBuffer>() {
                    Ok(pb) => (
                        pb.get()
                            .meta
                            .dtype
                            .name()
                            .unwrap_or_else(|_| "uint8".into()),
                        pb.get().meta.shape.clone(),
                    ),
                    Err(_) => ("uint8".into(), vec![inner.nbytes() as i64]),
                };
                Ok((n.clone(), Owned::Tensor(inner, dtype, shape)))
            })
            .collect::<PyResult<_>>()?;
        let inner = Arc::clone(&self.inner);
        let report = py
            .detach(move || {
                let refs: Vec<(String, transfer::Leaf<'_>)> = owned
                    .iter()
                    .map(|(n, o)| {
                        let leaf = match o {
                            Owned::Tensor(b, dtype, shape) => transfer::Leaf::Tensor {
                                buffer: b,
                                dtype: dtype.clone(),
                                shape: shape.clone(),
                            },
                            Owned::Value(v) => transfer::Leaf::Value(v.clone()),
                        };
                        (n.clone(), leaf)
                    })
                    .collect();
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
        let values = PyDict::new(py);
        for (name, value) in report.values {
            values.set_item(name, PyBytes::new(py, &value))?;
        }
        d.set_item("values", values)?;
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
    m.add("CollectiveNoDeviceError", collective_no_device_type(py)?)?;
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
