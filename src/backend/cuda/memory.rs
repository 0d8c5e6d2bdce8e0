//! Device and host memory the launchers share: buffers allocated and uploaded
//! ([`CudaEngine::upload`], [`CudaEngine::alloc`]), poisoned where a kernel must overwrite every
//! element, page-locked host buffers ([`HostBuf`]) and buffers kept between calls and only grown.
//! No kernels of its own.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

use super::CudaEngine;
use super::error::{During, Result};

/// 32-bit words written by `poison_outputs`: a NaN as f32, and twice over a NaN as f64, that no
/// arithmetic produces.
pub const POISON: u32 = 0x7FF5_BAD5;

/// Host memory for copies: page-locked when the driver grants it, else an ordinary vector.
pub(super) enum HostBuf<T> {
    Pinned(PinnedHostSlice<T>),
    Pageable(Vec<T>),
}

impl<T: ValidAsZeroBits + DeviceRepr + Default + Clone> HostBuf<T> {
    /// `len` zeroed elements; page-locked with `flags` (`cuMemHostAlloc`) when possible.
    pub(super) fn new(ctx: &Arc<CudaContext>, len: usize, flags: u32) -> Self {
        // SAFETY: the memory is zeroed below before any slice of it is made.
        match unsafe { ctx.alloc_pinned_with_flags::<T>(len, flags) } {
            Ok(mut pinned) => match pinned.as_mut_ptr() {
                Ok(ptr) => {
                    // SAFETY: `ptr` points to `len` elements just allocated; all-zero bytes
                    // are a valid `T` (`ValidAsZeroBits`).
                    unsafe { std::ptr::write_bytes(ptr, 0, len) };
                    HostBuf::Pinned(pinned)
                }
                Err(_) => HostBuf::Pageable(vec![T::default(); len]),
            },
            Err(_) => HostBuf::Pageable(vec![T::default(); len]),
        }
    }
    pub(super) fn len(&self) -> usize {
        match self {
            HostBuf::Pinned(p) => p.len(),
            HostBuf::Pageable(v) => v.len(),
        }
    }
    pub(super) fn is_pinned(&self) -> bool {
        matches!(self, HostBuf::Pinned(_))
    }
    /// The elements. Callers make sure no copy that uses them is in flight
    /// ([`Scratch::in_flight`]).
    pub(super) fn slice_mut(&mut self) -> Result<&mut [T]> {
        match self {
            HostBuf::Pinned(p) => p.as_mut_slice().during(|| "mapping a page-locked buffer".into()),
            HostBuf::Pageable(v) => Ok(v),
        }
    }
}

/// Grows `slot` to at least `len` elements (by half again at least, so that slowly growing
/// sizes reallocate rarely).
pub(super) fn grow_host<'a, T: ValidAsZeroBits + DeviceRepr + Default + Clone>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<HostBuf<T>>,
    len: usize,
    flags: u32,
) -> &'a mut HostBuf<T> {
    let old = slot.as_ref().map_or(0, HostBuf::len);
    if old < len {
        *slot = None; // free the old one first
        *slot = Some(HostBuf::new(ctx, len.max(old + old / 2), flags));
    }
    slot.as_mut().expect("just filled")
}

/// Grows `slot` to at least `len` elements, uninitialised (by half again at least).
pub(super) fn grow_device<'a, T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<CudaSlice<T>>,
    len: usize,
    what: &str,
) -> Result<&'a mut CudaSlice<T>> {
    let old = slot.as_ref().map_or(0, |s| s.len());
    if old < len {
        *slot = None;
        // SAFETY: uninitialised; every element a call reads is written first by that call (the
        // input by its copy, partials and sums by the kernels) or poisoned.
        *slot = Some(unsafe { stream.alloc::<T>(len.max(old + old / 2).max(1)) }.during(|| what.to_string())?);
    }
    Ok(slot.as_mut().expect("just filled"))
}

/// Fills the first `words` 32-bit words at `ptr` with [`POISON`], on `stream`.
pub(super) fn poison(ptr: cudarc::driver::sys::CUdeviceptr, words: usize, stream: &CudaStream, what: &str) -> Result<()> {
    // SAFETY: callers pass a pointer to at least `words` words of a live buffer, ordered on
    // `stream` before every later use.
    unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, POISON, words, stream.cu_stream()) }
        .result()
        .during(|| format!("poisoning ({what})"))
}

/// Sets `words` 32-bit words at `ptr` to `value`, queued on `stream`.
pub(super) fn fill_words(ptr: cudarc::driver::sys::CUdeviceptr, words: usize, value: u32, stream: &CudaStream, what: &str) -> Result<()> {
    // SAFETY: callers pass a pointer to at least `words` words of a live buffer, ordered on
    // `stream` before every later use.
    unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, value, words, stream.cu_stream()) }
        .result()
        .during(|| format!("filling {what}"))
}

/// A zeroed device buffer of `n` elements (at least 1).
pub(super) fn zeros<T: DeviceRepr + ValidAsZeroBits>(stream: &Arc<CudaStream>, n: usize, what: &str) -> Result<CudaSlice<T>> {
    stream.alloc_zeros::<T>(n.max(1)).during(|| what.to_string())
}

impl CudaEngine {
    /// Copies `host` to a new device buffer (one zero element when `host` is empty, so that no
    /// allocation is of zero bytes).
    pub(super) fn upload<T: DeviceRepr + Default + Copy>(&self, host: &[T], what: &str) -> Result<CudaSlice<T>> {
        let one = [T::default()];
        let src = if host.is_empty() { &one[..] } else { host };
        self.stream.clone_htod(src).during(|| what.to_string())
    }

    /// A device buffer of `len` elements (at least 1) whose contents the kernels overwrite;
    /// filled with [`POISON`] when asked.
    pub(super) fn alloc<T: DeviceRepr>(&self, len: usize, poison: bool, what: &str) -> Result<CudaSlice<T>> {
        assert!(size_of::<T>() % 4 == 0, "poisoning writes 32-bit words");
        // SAFETY: the memory is uninitialised, but every element is written by a kernel before
        // it is read back (see the launches), or poisoned here first.
        let mut buf = unsafe { self.stream.alloc::<T>(len.max(1)) }.during(|| what.to_string())?;
        if poison {
            let words = buf.len() * size_of::<T>() / 4;
            let stream: &Arc<_> = &self.stream;
            let (ptr, _record) = buf.device_ptr_mut(stream);
            // SAFETY: `ptr` points to `words` 32-bit words of `buf`, which lives past the
            // memset (it is ordered on the same stream as every later use).
            unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, POISON, words, stream.cu_stream()) }
                .result()
                .during(|| format!("poisoning ({what})"))?;
        }
        Ok(buf)
    }
}
