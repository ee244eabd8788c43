//! DLPack, both ways, without copying: the FFI layer of the runtime crate for tensors (all of the
//! crate's capsule and `DLManagedTensor` handling, and its only raw-pointer work besides the CUDA
//! calls of `memory.rs`/`comm.rs`).
//!
//! - **Import** (`import`): calls the producer's `__dlpack_device__()` and `__dlpack__(...)`, asking
//!   for the versioned form (DLPack 1.x, capsule `"dltensor_versioned"`, `max_version=(1, 1)`,
//!   `copy=False`) and falling back to the legacy one (`"dltensor"`) for producers that predate it.
//!   The tensor is checked (device, contiguity, dtype, a major version we understand); only then is
//!   the capsule renamed `"used_dltensor[_versioned]"` (so its destructor leaves the tensor alone)
//!   and the `DLManagedTensor[Versioned]` owned by the new buffer, whose drop calls the producer's
//!   deleter (with the GIL: numpy's and torch's deleters release Python objects). A tensor that
//!   fails a check is never taken: the capsule still owns it and frees it. `READ_ONLY` (1.x flag)
//!   becomes a read-only buffer, which refuses to be written (a receive target, a fill, a copy).
//! - **Export** (`Buffer.__dlpack__`): a `DLManagedTensor[Versioned]` whose `manager_ctx` holds an
//!   `Arc` of the buffer (the memory lives as long as the consumer's tensor) and the shape; its
//!   deleter drops that. The capsule's destructor calls the deleter only if nobody consumed it.
//!
//! Layouts are the ones of `dlpack.h` v1.1 (`DLTensor` is the same in 0.x and 1.x).
use std::ffi::{c_void, CStr};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::memory::Buffer;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const FLAG_READ_ONLY: u64 = 1;
const FLAG_IS_COPIED: u64 = 1 << 1;
const fn name(bytes: &'static [u8]) -> &'static CStr {
    // SAFETY: every caller passes a literal with one NUL, at the end.
    unsafe { CStr::from_bytes_with_nul_unchecked(bytes) }
}
const LEGACY: &CStr = name(b"dltensor\0");
const VERSIONED: &CStr = name(b"dltensor_versioned\0");
const USED_LEGACY: &CStr = name(b"used_dltensor\0");
const USED_VERSIONED: &CStr = name(b"used_dltensor_versioned\0");

/// DLPack device type names, for messages.
pub fn device_name(device_type: i32) -> String {
    match device_type {
        1 => "kDLCPU (host memory)".into(),
        2 => "kDLCUDA".into(),
        3 => "kDLCUDAHost (pinned host memory)".into(),
        4 => "kDLOpenCL".into(),
        7 => "kDLVulkan".into(),
        8 => "kDLMetal".into(),
        9 => "kDLVPI".into(),
        10 => "kDLROCM".into(),
        11 => "kDLROCMHost (pinned host memory)".into(),
        13 => "kDLCUDAManaged".into(),
        14 => "kDLOneAPI".into(),
        other => format!("DLPack device type {other}"),
    }
}

impl DLDataType {
    pub const UINT8: DLDataType = DLDataType {
        code: 1,
        bits: 8,
        lanes: 1,
    };

    /// The dtype's name (numpy/torch spelling), or why it cannot be moved or checksummed.
    pub fn name(&self) -> Result<String, String> {
        let DLDataType { code, bits, lanes } = *self;
        if lanes != 1 {
            return Err(format!(
                "vector dtypes ({lanes} lanes of code {code}, {bits} bits) are not supported"
            ));
        }
        let base = match code {
            0 => "int",
            1 => "uint",
            2 => "float",
            4 => "bfloat",
            5 => "complex",
            6 => "bool",
            7 => "float8_e3m4",
            8 => "float8_e4m3",
            9 => "float8_e4m3b11fnuz",
            10 => "float8_e4m3fn",
            11 => "float8_e4m3fnuz",
            12 => "float8_e5m2",
            13 => "float8_e5m2fnuz",
            14 => "float8_e8m0fnu",
            3 => return Err("opaque handles (kDLOpaqueHandle) are not data".into()),
            15..=17 => {
                return Err(format!(
                "sub-byte packed floats (DLPack type code {code}, {bits} bits) are not supported: \
                     the checksum and the transfer work on whole bytes per element"
            ))
            }
            other => return Err(format!("unknown DLPack type code {other}")),
        };
        if bits == 0 || bits % 8 != 0 {
            return Err(format!(
                "{base} elements of {bits} bits are not whole bytes: the checksum and the transfer work on \
                 whole bytes per element"
            ));
        }
        Ok(match code {
            6 => "bool".into(),
            7..=14 => base.into(),
            _ => format!("{base}{bits}"),
        })
    }

    /// Bytes per element.
    pub fn size(&self) -> usize {
        self.bits as usize / 8 * self.lanes as usize
    }
}

/// A tensor's description as the buffer keeps it (dtype, shape), for export and manifests.
#[derive(Clone, Debug)]
pub struct Meta {
    pub dtype: DLDataType,
    pub shape: Vec<i64>,
    /// Whether it came from a producer (false: a plain Buffer, described as uint8 bytes).
    pub typed: bool,
}

impl Meta {
    pub fn bytes(nbytes: usize) -> Meta {
        Meta {
            dtype: DLDataType::UINT8,
            shape: vec![nbytes as i64],
            typed: false,
        }
    }
}

/// The producer's tensor, owned until the buffer wrapping it is dropped.
struct Owned {
    ptr: usize,
    versioned: bool,
}

impl Drop for Owned {
    fn drop(&mut self) {
        // Deleters of Python producers release Python objects: take the GIL (the buffer may be
        // dropped in a thread that released it).
        Python::attach(|_| {
            // SAFETY: `ptr` is the managed tensor this buffer took over from a consumed capsule;
            // its deleter is called exactly once, here.
            unsafe {
                if self.versioned {
                    let m = self.ptr as *mut DLManagedTensorVersioned;
                    if let Some(deleter) = (*m).deleter {
                        deleter(m);
                    }
                } else {
                    let m = self.ptr as *mut DLManagedTensor;
                    if let Some(deleter) = (*m).deleter {
                        deleter(m);
                    }
                }
            }
        });
    }
}

/// A producer's tensor wrapped as a buffer, and its description.
pub struct Imported {
    pub buffer: Buffer,
    pub meta: Meta,
}

fn bad(what: &str) -> PyErr {
    PyValueError::new_err(format!("from_dlpack: {what}"))
}

/// Calls `__dlpack__` with the most capable form the producer accepts.
fn export_capsule<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let method = obj.getattr("__dlpack__").map_err(|_| {
        PyTypeError::new_err(format!(
            "from_dlpack: a {} is not a DLPack producer (it has no __dlpack__): pass a numpy array, a \
             torch or CuPy tensor, or a monarch_runtime.Buffer",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let attempts: [&[(&str, bool)]; 3] = [
        &[("max_version", true), ("copy", true)],
        &[("max_version", true)],
        &[],
    ];
    let mut last = None;
    for attempt in attempts {
        let kwargs = PyDict::new(py);
        if let Some(stream) = rocm_compat::DLPACK_STREAM {
            kwargs.set_item("stream", stream)?;
        }
        for (key, _) in attempt {
            match *key {
                "max_version" => kwargs.set_item(key, PyTuple::new(py, [1u32, 1u32])?)?,
                _ => kwargs.set_item(key, false)?,
            }
        }
        match method.call((), Some(&kwargs)) {
            Ok(capsule) => return Ok(capsule),
            // An older producer that does not know a keyword: try the next form.
            Err(e) if e.is_instance_of::<PyTypeError>(py) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| bad("__dlpack__ failed")))
}

fn capsule_name(capsule: &Bound<'_, PyAny>) -> Option<&'static CStr> {
    let ptr = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid accepts any object and name.
    unsafe {
        for name in [VERSIONED, LEGACY, USED_VERSIONED, USED_LEGACY] {
            if pyo3::ffi::PyCapsule_IsValid(ptr, name.as_ptr()) == 1 {
                return Some(name);
            }
        }
    }
    None
}

/// Wraps a DLPack producer's tensor as a buffer, without copying; see the module docs.
pub fn import(obj: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let expected = rocm_compat::DLPACK_DEVICE_TYPE;
    let build = rocm_compat::PLATFORM;
    if let Ok(method) = obj.getattr("__dlpack_device__") {
        let (device_type, device_id): (i32, i32) = method.call0()?.extract()?;
        check_device(device_type, device_id, expected, build)?;
    }
    let capsule = export_capsule(obj)?;
    let name = capsule_name(&capsule).ok_or_else(|| {
        PyTypeError::new_err("from_dlpack: __dlpack__ did not return a DLPack capsule")
    })?;
    if name == USED_LEGACY || name == USED_VERSIONED {
        return Err(bad(
            "the producer returned a capsule that was already consumed",
        ));
    }
    let versioned = name == VERSIONED;
    let raw = capsule.as_ptr();
    // SAFETY: the capsule is valid with this name (checked above); its pointer is the producer's
    // managed tensor, alive while the capsule is unconsumed.
    let (tensor, flags, managed) = unsafe {
        let ptr = pyo3::ffi::PyCapsule_GetPointer(raw, name.as_ptr());
        if ptr.is_null() {
            return Err(PyErr::fetch(obj.py()));
        }
        if versioned {
            let m = ptr as *mut DLManagedTensorVersioned;
            if (*m).version.major != 1 {
                return Err(bad(&format!(
                    "the producer speaks DLPack {}.{}; this build understands 1.x",
                    (*m).version.major,
                    (*m).version.minor
                )));
            }
            (&(*m).dl_tensor as *const DLTensor, (*m).flags, ptr as usize)
        } else {
            let m = ptr as *mut DLManagedTensor;
            (&(*m).dl_tensor as *const DLTensor, 0u64, ptr as usize)
        }
    };
    // SAFETY: the DLTensor lives in the managed tensor, alive while the capsule is unconsumed;
    // shape and strides hold ndim entries each (strides may be null: compact row-major).
    let (data, device, dtype, shape, strides) = unsafe {
        let t = &*tensor;
        let ndim = usize::try_from(t.ndim).map_err(|_| bad("negative ndim"))?;
        let shape = if ndim == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(t.shape, ndim).to_vec()
        };
        let strides = if t.strides.is_null() || ndim == 0 {
            None
        } else {
            Some(std::slice::from_raw_parts(t.strides, ndim).to_vec())
        };
        let data = (t.data as *mut u8).wrapping_add(t.byte_offset as usize) as *mut c_void;
        (data, t.device, t.dtype, shape, strides)
    };
    check_device(device.device_type, device.device_id, expected, build)?;
    let dtype_name = dtype.name().map_err(|why| {
        bad(&format!(
            "a tensor of this dtype cannot be checksummed or transferred: {why}"
        ))
    })?;
    if flags & FLAG_IS_COPIED != 0 {
        return Err(bad(
            "the producer handed over a copy (DLPack IS_COPIED): writes would not reach the original; \
             from_dlpack needs the tensor's own memory",
        ));
    }
    if let Some(strides) = &strides {
        if !contiguous(&shape, strides) {
            return Err(bad(&format!(
                "the {dtype_name} tensor of shape {shape:?} is not contiguous (strides {strides:?} elements, \
                 row-major compact needs {:?}): make it contiguous first (numpy.ascontiguousarray(x), \
                 x.contiguous())",
                compact_strides(&shape)
            )));
        }
    }
    let mut elements: usize = 1;
    for &d in &shape {
        let d = usize::try_from(d).map_err(|_| bad(&format!("negative dimension in {shape:?}")))?;
        elements = elements
            .checked_mul(d)
            .ok_or_else(|| bad("the tensor's size overflows"))?;
    }
    let nbytes = elements
        .checked_mul(dtype.size())
        .ok_or_else(|| bad("the tensor's size overflows"))?;
    // Take the tensor: from here on the capsule no longer frees it, the buffer does.
    let used = if versioned {
        USED_VERSIONED
    } else {
        USED_LEGACY
    };
    // SAFETY: renaming a valid capsule to a static name.
    if unsafe { pyo3::ffi::PyCapsule_SetName(raw, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let owned = Owned {
        ptr: managed,
        versioned,
    };
    // SAFETY: the producer's memory: `nbytes` bytes at `data` on `device`, alive until `owned`
    // (the managed tensor) is released by the buffer's drop.
    let buffer = unsafe {
        Buffer::from_external(
            data,
            nbytes,
            device.device_id,
            Box::new(owned),
            flags & FLAG_READ_ONLY != 0,
        )
    };
    Ok(Imported {
        buffer,
        meta: Meta {
            dtype,
            shape,
            typed: true,
        },
    })
}

fn check_device(device_type: i32, device_id: i32, expected: i32, build: &str) -> PyResult<()> {
    if device_type == expected {
        if device_type == 1 && device_id != 0 {
            return Err(bad(&format!("host memory with device id {device_id}")));
        }
        return Ok(());
    }
    let what = device_name(device_type);
    Err(bad(&if expected == 1 {
        format!(
            "the tensor is on a {what} device ({device_id}), but this is the CPU build of monarch_runtime, which \
             works on host memory: move it to the host first (tensor.cpu()), or use a CUDA/ROCm build"
        )
    } else if matches!(device_type, 1 | 3 | 11) {
        format!(
            "host memory ({what}) given to the {build} build's device path: move the tensor to the GPU first \
             (tensor.cuda(), cupy.asarray)"
        )
    } else {
        format!(
            "the tensor is on a {what} device ({device_id}); the {build} build works on {} memory",
            device_name(expected)
        )
    }))
}

fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
    }
    strides
}

/// Row-major compact, ignoring the strides of dimensions of size 1; an empty tensor is contiguous.
fn contiguous(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let want = compact_strides(shape);
    shape
        .iter()
        .zip(strides.iter().zip(&want))
        .all(|(&d, (&s, &w))| d == 1 || s == w)
}

/// What an exported tensor keeps alive: the buffer and the shape its DLTensor points into.
struct Export {
    _buffer: Arc<Buffer>,
    shape: Vec<i64>,
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: both boxes were leaked by `export` for this managed tensor; freed once, here.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Export));
        drop(Box::from_raw(m));
    }
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: as in delete_legacy.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Export));
        drop(Box::from_raw(m));
    }
}

/// The capsule's destructor: frees the tensor unless a consumer took it (renamed the capsule).
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; the names are checked first.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let m = pyo3::ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                as *mut DLManagedTensorVersioned;
            delete_versioned(m);
        } else if pyo3::ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let m =
                pyo3::ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()) as *mut DLManagedTensor;
            delete_legacy(m);
        } else {
            // A consumer renamed it and owns the tensor; nothing to do (and no error to leave).
            pyo3::ffi::PyErr_Clear();
        }
    }
}

/// A DLPack capsule of `buffer`'s memory described by `meta`: versioned when `versioned`.
pub fn export<'py>(
    py: Python<'py>,
    buffer: Arc<Buffer>,
    meta: &Meta,
    versioned: bool,
    copied: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let nbytes = buffer.nbytes();
    let (dtype, shape) = if meta.dtype.size() > 0
        && meta.shape.iter().product::<i64>() as usize * meta.dtype.size() == nbytes
    {
        (meta.dtype, meta.shape.clone())
    } else {
        (DLDataType::UINT8, vec![nbytes as i64])
    };
    let device = DLDevice {
        device_type: rocm_compat::DLPACK_DEVICE_TYPE,
        device_id: buffer.device(),
    };
    let read_only = buffer.is_read_only();
    let data = buffer.at(0);
    let ctx = Box::into_raw(Box::new(Export {
        _buffer: buffer,
        shape,
    }));
    // SAFETY: `ctx` is a live box; its shape vector outlives the managed tensor (freed together).
    let (shape_ptr, ndim) = unsafe { ((*ctx).shape.as_mut_ptr(), (*ctx).shape.len() as i32) };
    let tensor = DLTensor {
        data,
        device,
        ndim,
        dtype,
        shape: shape_ptr,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let (ptr, name) = if versioned {
        let mut flags = 0;
        if read_only {
            flags |= FLAG_READ_ONLY;
        }
        if copied {
            flags |= FLAG_IS_COPIED;
        }
        let m = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: ctx as *mut c_void,
            deleter: Some(delete_versioned),
            flags,
            dl_tensor: tensor,
        }));
        (m as *mut c_void, VERSIONED)
    } else {
        if read_only {
            // SAFETY: frees what was just made (ctx), nothing else holds it.
            unsafe { drop(Box::from_raw(ctx)) };
            return Err(PyBufferError::new_err(
                "a read-only Buffer cannot be exported in the legacy DLPack form (it cannot say read-only); \
                 ask for max_version=(1, 0) or later",
            ));
        }
        let m = Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: ctx as *mut c_void,
            deleter: Some(delete_legacy),
        }));
        (m as *mut c_void, LEGACY)
    };
    // SAFETY: a fresh capsule owning `ptr` with a static name; on failure the tensor is freed.
    unsafe {
        let capsule = pyo3::ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor));
        if capsule.is_null() {
            if versioned {
                delete_versioned(ptr as *mut DLManagedTensorVersioned);
            } else {
                delete_legacy(ptr as *mut DLManagedTensor);
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}

/// The DLPack device of a buffer: (device type, device id).
pub fn device_of(buffer: &Buffer) -> (i32, i32) {
    (rocm_compat::DLPACK_DEVICE_TYPE, buffer.device())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_and_refusals() {
        let f = |code, bits, lanes| DLDataType { code, bits, lanes }.name();
        assert_eq!(f(2, 32, 1).unwrap(), "float32");
        assert_eq!(f(4, 16, 1).unwrap(), "bfloat16");
        assert_eq!(f(6, 8, 1).unwrap(), "bool");
        assert_eq!(f(10, 8, 1).unwrap(), "float8_e4m3fn");
        assert!(f(2, 32, 4).is_err());
        assert!(f(17, 4, 1).is_err());
        assert!(f(1, 4, 1).is_err());
        assert!(f(3, 64, 1).is_err());
    }

    #[test]
    fn contiguity() {
        assert!(contiguous(&[2, 3], &[3, 1]));
        assert!(!contiguous(&[2, 3], &[1, 2]));
        assert!(contiguous(&[1, 3], &[99, 1]));
        assert!(contiguous(&[0, 3], &[7, 7]));
        assert!(!contiguous(&[4], &[2]));
        assert_eq!(compact_strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
