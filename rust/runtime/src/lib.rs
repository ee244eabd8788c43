//! `monarch_runtime._native`: the Python extension. Platform-neutral: it speaks CUDA names through
//! `rocm_compat`, which binds them to CUDA, HIP or the host emulation.
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub mod gpu;

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
    "An NCCL/RCCL call failed, or the library could not be loaded."
);

fn to_py(err: gpu::Error) -> PyErr {
    match err {
        gpu::Error::Cuda(e) if e.is_no_device() => NoDeviceError::new_err(format!(
            "no usable GPU ({}): {}. The {} build needs a driver and a device.",
            e.name,
            e.message,
            rocm_compat::PLATFORM
        )),
        gpu::Error::Cuda(e) => MonarchError::new_err(e.to_string()),
        gpu::Error::Collective(msg) => CollectiveError::new_err(msg),
        gpu::Error::Kernel(msg) => MonarchError::new_err(msg),
    }
}

/// Number of visible GPUs. The CPU build has none (0); a GPU build without a driver or device
/// raises NoDeviceError naming the cause.
#[pyfunction]
fn device_count() -> PyResult<i32> {
    gpu::device_count().map_err(to_py)
}

/// Properties of one device as a dict: name, arch, warp_size, total_memory, multiprocessors.
#[pyfunction]
fn device_properties(py: Python<'_>, device: i32) -> PyResult<Py<PyDict>> {
    let p = rocm_compat::device::properties(device).map_err(|e| to_py(gpu::Error::Cuda(e)))?;
    let d = PyDict::new(py);
    d.set_item("name", p.name)?;
    d.set_item("arch", p.arch)?;
    d.set_item("major", p.major)?;
    d.set_item("minor", p.minor)?;
    d.set_item("warp_size", p.warp_size)?;
    d.set_item("multiprocessors", p.multiprocessors)?;
    d.set_item("total_memory", p.total_memory)?;
    Ok(d.unbind())
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
    d.set_item("loaded", info.error.is_none())?;
    d.set_item("version", info.version)?;
    d.set_item("error", info.error)?;
    Ok(d.unbind())
}

/// Sum-all-reduce of float32 values on one rank of device 0 (a smoke test of the collective path).
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PLATFORM", rocm_compat::PLATFORM)?;
    m.add("MonarchError", m.py().get_type::<MonarchError>())?;
    m.add("NoDeviceError", m.py().get_type::<NoDeviceError>())?;
    m.add("CollectiveError", m.py().get_type::<CollectiveError>())?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(checksum, m)?)?;
    m.add_function(wrap_pyfunction!(checksum_reference, m)?)?;
    m.add_function(wrap_pyfunction!(collective_info, m)?)?;
    m.add_function(wrap_pyfunction!(all_reduce_single_rank, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(launch_kernel, m)?)?;
    Ok(())
}
