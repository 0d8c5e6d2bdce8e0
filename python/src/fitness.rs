//! A fitness function of the user's own (`SymbolicRegressor(fitness_function=f)`): the engine
//! hands it each generation's predictions, `f(pred, y)` with `pred` `(programs, rows)` and `y`
//! `(rows,)`, and reads back one score per program (lower is better).
//!
//! On the CPU the batch is a numpy array that owns the engine's buffer (no copy). On a GPU it
//! stays on the device: `pred` and `y` are [`DlArray`]s, objects of the DLPack protocol
//! (`__dlpack__`, `__dlpack_device__`) that `torch.from_dlpack` and `cupy.from_dlpack` wrap
//! without a copy; the memory is the engine's batch, freed when the last consumer lets go of
//! it. The scores come back through DLPack too (a CUDA tensor is read with one device-to-host
//! copy of `programs` numbers), or as anything `numpy.asarray` reads. `fitness_arrays="dlpack"`
//! hands [`DlArray`]s on the CPU as well.
//!
//! What the function gets wrong stops the run, nothing half-written: an exception it raises is
//! raised again by `fit`, as it was; a wrong shape, a dtype that is no number or NaN for a
//! program whose predictions are finite is a `ValueError` saying so.

use std::ffi::{CStr, c_void};
use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use grove::backend::PredictionBatch;
use grove::backend::cuda::DeviceBatch;

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
const KDL_CUDA_MANAGED: i32 = 13;
const KDL_INT: u8 = 0;
const KDL_UINT: u8 = 1;
const KDL_FLOAT: u8 = 2;
const DLTENSOR: &CStr = c"dltensor";
const USED_DLTENSOR: &CStr = c"used_dltensor";

/// DLPack's `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// DLPack's `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// DLPack's `DLManagedTensor` (the legacy, unversioned capsule `dltensor`).
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What keeps an exported array's memory alive (held, never read: dropping the last holder
/// frees the memory).
#[derive(Clone)]
#[allow(dead_code)]
enum Owner {
    /// Host memory: the batch's predictions or targets.
    Host(Arc<Vec<f32>>),
    /// A batch on a GPU (both its buffers).
    Device(Arc<DeviceBatch>),
}

/// One exported tensor: the DLPack struct first (its address is the capsule's pointer and the
/// `manager_ctx`), its shape, and the owner of the memory it points into.
#[repr(C)]
struct Exported {
    managed: DlManagedTensor,
    shape: [i64; 2],
    owner: Owner,
}

/// Frees an [`Exported`] (the DLPack deleter, called by the consumer, or by the capsule's
/// destructor when no consumer took it).
unsafe extern "C" fn delete_exported(m: *mut DlManagedTensor) {
    if !m.is_null() {
        // SAFETY: `m` is the first field of an `Exported` made by `Box::into_raw` in
        // `DlArray::__dlpack__`, deleted once (DLPack's contract).
        drop(unsafe { Box::from_raw(m as *mut Exported) });
    }
}

/// The destructor of a capsule we made: frees the tensor unless a consumer took it (a consumer
/// renames the capsule `used_dltensor` and calls the deleter itself).
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: `capsule` is a capsule object; IsValid sets no error.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let m = pyo3::ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()) as *mut DlManagedTensor;
            delete_exported(m);
        }
    }
}

/// An array of float32 values that the DLPack protocol hands over without a copy: the
/// predictions `(programs, rows)` or targets `(rows,)` a fitness function receives. Wrap it with
/// `torch.from_dlpack(a)`, `cupy.from_dlpack(a)` or `numpy.from_dlpack(a)` (on the CPU).
#[pyclass(module = "grove._grove", frozen)]
pub struct DlArray {
    owner: Owner,
    data: u64,
    shape: Vec<i64>,
    device: (i32, i32),
}

impl DlArray {
    /// Host values, owned.
    fn host(values: Vec<f32>, shape: Vec<i64>) -> Self {
        let owner = Arc::new(values);
        let data = owner.as_ptr() as u64;
        DlArray { owner: Owner::Host(owner), data, shape, device: (KDL_CPU, 0) }
    }

    /// A batch's predictions (`y == false`) or targets on its GPU.
    fn on_gpu(batch: &Arc<DeviceBatch>, y: bool) -> Self {
        let (p, n) = batch.shape();
        let (data, shape) = if y { (batch.y_ptr(), vec![n as i64]) } else { (batch.pred_ptr(), vec![p as i64, n as i64]) };
        DlArray { owner: Owner::Device(batch.clone()), data, shape, device: (KDL_CUDA, batch.ordinal() as i32) }
    }
}

#[pymethods]
impl DlArray {
    /// A DLPack capsule of the array (legacy `dltensor`, which every consumer takes). The data
    /// is ready on every stream (the engine synchronised its own), so `stream` is accepted and
    /// needs nothing; a copy is never made (`copy=True` is refused).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version);
        if let Some(d) = dl_device {
            if d != self.device {
                return Err(PyValueError::new_err(format!("the array is on DLPack device {:?}; it is not copied to {d:?}", self.device)));
            }
        }
        if copy == Some(true) {
            return Err(PyValueError::new_err("the array is handed over without a copy (copy=True asks for one)"));
        }
        let mut shape = [0i64; 2];
        shape[..self.shape.len()].copy_from_slice(&self.shape);
        let exported = Box::new(Exported {
            managed: DlManagedTensor {
                dl_tensor: DlTensor {
                    data: self.data as *mut c_void,
                    device: DlDevice { device_type: self.device.0, device_id: self.device.1 },
                    ndim: self.shape.len() as i32,
                    dtype: DlDataType { code: KDL_FLOAT, bits: 32, lanes: 1 },
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_exported),
            },
            shape,
            owner: self.owner.clone(),
        });
        let raw = Box::into_raw(exported);
        // SAFETY: `raw` is a live, uniquely owned Exported; its shape array lives as long as it.
        unsafe {
            (*raw).managed.dl_tensor.shape = (*raw).shape.as_mut_ptr();
            (*raw).managed.manager_ctx = raw as *mut c_void;
        }
        // SAFETY: a capsule around the DLManagedTensor at `raw` (the first field of Exported)
        // named "dltensor", whose destructor frees it unless a consumer took it.
        let capsule = unsafe { pyo3::ffi::PyCapsule_New(raw as *mut c_void, DLTENSOR.as_ptr(), Some(capsule_destructor)) };
        if capsule.is_null() {
            // SAFETY: the capsule was not made, so nothing else owns `raw`.
            unsafe { delete_exported(raw as *mut DlManagedTensor) };
            return Err(PyErr::fetch(py));
        }
        // SAFETY: a new reference PyCapsule_New returned.
        Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
    }

    /// `(device type, device id)`: `(1, 0)` on the CPU, `(2, GPU)` on a CUDA GPU.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.device
    }

    /// The shape: `(programs, rows)` or `(rows,)`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// Always `"float32"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        "float32"
    }

    /// `"cpu"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        if self.device.0 == KDL_CUDA { format!("cuda:{}", self.device.1) } else { "cpu".into() }
    }

    fn __len__(&self) -> usize {
        self.shape[0] as usize
    }

    fn __repr__(&self) -> String {
        format!("DlArray(shape={:?}, dtype=float32, device={})", self.shape, self.device())
    }
}

/// How a fitness function gets its arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrays {
    /// numpy arrays on the CPU, [`DlArray`]s on a GPU.
    Auto,
    /// [`DlArray`]s everywhere.
    DlPack,
}

/// The engine's side of a Python fitness function.
pub struct PyFitness {
    func: Py<PyAny>,
    name: String,
    arrays: Arrays,
    /// The first Python error of a call, which `fit` raises when the run stops.
    error: Mutex<Option<PyErr>>,
}

impl PyFitness {
    /// Wraps `func` (named by its `__qualname__`, else `__name__`, else its type).
    pub fn new(func: &Bound<'_, PyAny>, arrays: Arrays) -> PyResult<Self> {
        if !func.is_callable() {
            return Err(PyValueError::new_err(format!("fitness_function must be callable as f(pred, y), got {}", func.get_type().name()?)));
        }
        let name = ["__qualname__", "__name__"]
            .iter()
            .find_map(|a| func.getattr(*a).ok().and_then(|n| n.extract::<String>().ok()))
            .unwrap_or_else(|| func.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "fitness".into()));
        Ok(PyFitness { func: func.clone().unbind(), name, arrays, error: Mutex::new(None) })
    }

    /// The Python error a call raised, if any (taken: `fit` raises it once).
    pub fn take_error(&self) -> Option<PyErr> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Calls the function on `batch` and reads its scores.
    fn call(&self, py: Python<'_>, batch: PredictionBatch) -> PyResult<Vec<f64>> {
        let (p, n) = batch.shape();
        let valid = batch.valid();
        let (pred, y, on_gpu): (Bound<'_, PyAny>, Bound<'_, PyAny>, Option<Arc<DeviceBatch>>) = match batch {
            PredictionBatch::Host { pred, y, .. } if self.arrays == Arrays::Auto => {
                (PyArray1::from_vec(py, pred).reshape([p, n])?.into_any(), PyArray1::from_vec(py, y).into_any(), None)
            }
            PredictionBatch::Host { pred, y, .. } => (
                Bound::new(py, DlArray::host(pred, vec![p as i64, n as i64]))?.into_any(),
                Bound::new(py, DlArray::host(y, vec![n as i64]))?.into_any(),
                None,
            ),
            PredictionBatch::Device(d) => {
                let d = Arc::new(d);
                (Bound::new(py, DlArray::on_gpu(&d, false))?.into_any(), Bound::new(py, DlArray::on_gpu(&d, true))?.into_any(), Some(d))
            }
        };
        let out = self.func.bind(py).call1((pred, y))?;
        let scores = scores_of(py, &out, p, on_gpu.as_deref(), &self.name)?;
        if let Some(i) = (0..p).find(|&i| valid[i] && scores[i].is_nan()) {
            return Err(PyValueError::new_err(format!(
                "fitness_function {} returned NaN for program {i} of {p}, whose predictions are all finite: return a number for every program (inf for the worst)",
                self.name
            )));
        }
        Ok(scores)
    }
}

impl grove::task::regression::BatchFitness for PyFitness {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn score(&self, batch: PredictionBatch) -> anyhow::Result<Vec<f64>> {
        Python::attach(|py| {
            self.call(py, batch).map_err(|e| {
                let message = format!("fitness_function {}: {e}", self.name);
                let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
                anyhow::anyhow!(message)
            })
        })
    }
}

/// The scores `out` holds for `p` programs, as f64: through its DLPack capsule where it has one
/// (a CUDA array read with one copy from `on_gpu`'s GPU; host memory read in place), else as
/// `numpy.asarray` reads it. A shape other than `(p,)` or `(p, 1)`, or values that are no
/// numbers, is a `ValueError` naming the function.
fn scores_of(py: Python<'_>, out: &Bound<'_, PyAny>, p: usize, on_gpu: Option<&DeviceBatch>, name: &str) -> PyResult<Vec<f64>> {
    let shape_error = |shape: &[i64]| {
        PyValueError::new_err(format!(
            "fitness_function {name} returned an array of shape {shape:?} for {p} programs: return one score per program, shape ({p},)"
        ))
    };
    let is_array = out.hasattr("__dlpack__")? && out.hasattr("__dlpack_device__")?;
    if is_array {
        let (kind, _id): (i32, i32) = out.call_method0("__dlpack_device__")?.extract()?;
        let capsule = match kind {
            KDL_CPU | KDL_CUDA_HOST => out.call_method0("__dlpack__").ok(),
            KDL_CUDA | KDL_CUDA_MANAGED if on_gpu.is_some() => Some(out.call_method0("__dlpack__")?),
            KDL_CUDA | KDL_CUDA_MANAGED => {
                return Err(PyValueError::new_err(format!("fitness_function {name} returned an array on a GPU for a run on the CPU: return its scores on the CPU")));
            }
            _ => None,
        };
        if let Some(c) = capsule {
            return read_capsule(py, &c, p, on_gpu, name, &shape_error);
        }
    }
    let np = py.import("numpy")?;
    let a = np
        .call_method1("asarray", (out, "float64"))
        .map_err(|e| PyValueError::new_err(format!("fitness_function {name} returned {} that is no array of numbers: {e}", out.get_type().name().map(|n| n.to_string()).unwrap_or_default())))?;
    let shape: Vec<i64> = a.getattr("shape")?.extract()?;
    if !(shape == [p as i64] || shape == [p as i64, 1]) {
        return Err(shape_error(&shape));
    }
    let flat = a.call_method0("ravel")?;
    let v: PyReadonlyArray1<'_, f64> = flat.extract()?;
    Ok(v.as_array().to_vec())
}

/// Reads the scores of a DLPack capsule (consuming it: renamed `used_dltensor`, its deleter
/// called).
fn read_capsule(
    py: Python<'_>,
    capsule: &Bound<'_, PyAny>,
    p: usize,
    on_gpu: Option<&DeviceBatch>,
    name: &str,
    shape_error: &dyn Fn(&[i64]) -> PyErr,
) -> PyResult<Vec<f64>> {
    // SAFETY: a capsule object; GetPointer checks its name and sets an error when it differs.
    let m = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), DLTENSOR.as_ptr()) } as *mut DlManagedTensor;
    if m.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| PyValueError::new_err(format!("fitness_function {name}: the array's __dlpack__ gave no DLPack tensor"))));
    }
    // The capsule is ours now: whatever happens below, the tensor is released once.
    struct Release(*mut DlManagedTensor);
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: the consumer of a DLPack capsule calls its deleter once.
            unsafe {
                if let Some(d) = (*self.0).deleter {
                    d(self.0);
                }
            }
        }
    }
    // SAFETY: renaming marks the capsule consumed, so its destructor leaves the tensor alone.
    unsafe { pyo3::ffi::PyCapsule_SetName(capsule.as_ptr(), USED_DLTENSOR.as_ptr()) };
    let _release = Release(m);
    // SAFETY: a DLManagedTensor the producer keeps valid until its deleter runs.
    let t = unsafe { &(*m).dl_tensor };
    let ndim = t.ndim.max(0) as usize;
    // SAFETY: DLPack's shape holds ndim entries (strides too, where not null).
    let shape: Vec<i64> = if ndim == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec() };
    let strides: Option<Vec<i64>> = (!t.strides.is_null() && ndim > 0).then(|| unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec());
    if !(shape == [p as i64] || shape == [p as i64, 1]) {
        return Err(shape_error(&shape));
    }
    let size = (t.dtype.bits / 8) as usize;
    let numeric = t.dtype.lanes == 1 && matches!((t.dtype.code, t.dtype.bits), (KDL_FLOAT, 32 | 64) | (KDL_INT | KDL_UINT, 8 | 16 | 32 | 64));
    if !numeric {
        return Err(PyValueError::new_err(format!(
            "fitness_function {name} returned an array of DLPack type code {} with {} bits × {} lanes: return float32 or float64 scores",
            t.dtype.code, t.dtype.bits, t.dtype.lanes
        )));
    }
    let step = strides.as_ref().map_or(1, |s| s[0]);
    if p > 0 && step <= 0 {
        return Err(PyValueError::new_err(format!("fitness_function {name} returned an array with stride {step}: return a plain array")));
    }
    let span = if p == 0 { 0 } else { ((p - 1) as i64 * step) as usize * size + size };
    let base = (t.data as u64).wrapping_add(t.byte_offset);
    let bytes: Vec<u8> = match t.device.device_type {
        KDL_CUDA | KDL_CUDA_MANAGED => {
            let batch = on_gpu.expect("a GPU capsule only with a batch on the GPU");
            // SAFETY: the producer's tensor spans `span` bytes from `base` on its device, kept
            // allocated until the deleter runs (after this read).
            unsafe { batch.read_device(base, span) }.map_err(|e| PyValueError::new_err(format!("fitness_function {name}: reading its scores from the GPU: {e}")))?
        }
        // SAFETY: host memory of `span` bytes from `base`, valid until the deleter runs.
        _ => unsafe { std::slice::from_raw_parts(base as *const u8, span) }.to_vec(),
    };
    let at = |i: usize| &bytes[i * step as usize * size..][..size];
    Ok((0..p)
        .map(|i| {
            let b = at(i);
            match (t.dtype.code, t.dtype.bits) {
                (KDL_FLOAT, 32) => f32::from_ne_bytes(b.try_into().unwrap()) as f64,
                (KDL_FLOAT, _) => f64::from_ne_bytes(b.try_into().unwrap()),
                (KDL_INT, 8) => i8::from_ne_bytes(b.try_into().unwrap()) as f64,
                (KDL_INT, 16) => i16::from_ne_bytes(b.try_into().unwrap()) as f64,
                (KDL_INT, 32) => i32::from_ne_bytes(b.try_into().unwrap()) as f64,
                (KDL_INT, _) => i64::from_ne_bytes(b.try_into().unwrap()) as f64,
                (_, 8) => b[0] as f64,
                (_, 16) => u16::from_ne_bytes(b.try_into().unwrap()) as f64,
                (_, 32) => u32::from_ne_bytes(b.try_into().unwrap()) as f64,
                _ => u64::from_ne_bytes(b.try_into().unwrap()) as f64,
            }
        })
        .collect())
}
