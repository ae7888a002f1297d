//! CUDA device memory as the model calls of a [`Context`] take it, for a host that holds its own
//! device buffers (a candle or TEI backend): [`DeviceSlice`] and [`DeviceSliceMut`] (a device
//! pointer, a length in elements and their dtype), [`DeviceIndices`] (a device array of u32, such
//! as the plan's maps a CUDA context copied), and [`Stream`] (a `cudaStream_t`). Each is made
//! `unsafe` from raw parts by a caller who vouches for the memory; every call then checks it
//! against the model (memory, dtype and length, buffer.rs) before the library, which checks that
//! the pointer is device memory of the model's device (`cudaPointerGetAttributes`).
use core::ffi::c_void;
use core::marker::PhantomData;

use crate::types::DType;
#[cfg(doc)] // the documentation links to it
use crate::{Context, Model};

/// `len` elements of `dtype` in device memory, read by a call (`&'a [T]` on the device).
///
/// ```
/// use radix_mlp::{DType, DeviceSlice};
///
/// // A host's own allocation (from cudaMalloc, candle's CudaSlice, ...): here only its address.
/// let (ptr, len) = (0x7f00_0000_0000usize as *const core::ffi::c_void, 4096);
/// // SAFETY (for a real pointer): device memory of the model's device holding `len` BF16 values,
/// // valid and not written by anyone else while the slice is in use.
/// let hidden = unsafe { DeviceSlice::from_raw_parts(ptr, len, DType::BF16) };
/// assert_eq!((hidden.len(), hidden.dtype(), hidden.byte_len()), (4096, DType::BF16, 8192));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DeviceSlice<'a> {
    ptr: *const c_void,
    len: usize,
    dtype: DType,
    _borrow: PhantomData<&'a [u8]>,
}

/// `len` elements of `dtype` in device memory, written by a call (`&'a mut [T]` on the device).
#[derive(Debug)]
pub struct DeviceSliceMut<'a> {
    /// The memory, as a read would see it (its pointer came from a `*mut`).
    inner: DeviceSlice<'a>,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a device slice is an address and a length, like `&[T]` / `&mut [T]`: moving it to another
// thread moves the right to use the memory, which only the library's calls touch (on a stream).
unsafe impl Send for DeviceSlice<'_> {}
unsafe impl Sync for DeviceSlice<'_> {}
unsafe impl Send for DeviceSliceMut<'_> {}
unsafe impl Sync for DeviceSliceMut<'_> {}

/// Bytes per element of `dtype`.
pub(crate) fn elem_size(dtype: DType) -> usize {
    match dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 2,
    }
}

impl<'a> DeviceSlice<'a> {
    /// A slice of `len` elements of `dtype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be device memory (of the device of every model it is passed to), aligned to the
    /// element size, holding `len` elements of `dtype`, valid for `'a` and not written by anyone
    /// else while a call's work on it may run (until the context's stream has run it).
    pub unsafe fn from_raw_parts(ptr: *const c_void, len: usize, dtype: DType) -> DeviceSlice<'a> {
        DeviceSlice { ptr, len, dtype, _borrow: PhantomData }
    }

    pub fn as_ptr(&self) -> *const c_void {
        self.ptr
    }

    /// Elements (of [`dtype`](Self::dtype)).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// `len * size_of(dtype)`.
    pub fn byte_len(&self) -> usize {
        self.len * elem_size(self.dtype)
    }
}

impl<'a> DeviceSliceMut<'a> {
    /// A writable slice of `len` elements of `dtype` at `ptr`.
    ///
    /// # Safety
    /// As [`DeviceSlice::from_raw_parts`], and nothing else reads or writes the memory while a
    /// call's work on it may run.
    pub unsafe fn from_raw_parts(ptr: *mut c_void, len: usize, dtype: DType) -> DeviceSliceMut<'a> {
        DeviceSliceMut { inner: DeviceSlice::from_raw_parts(ptr, len, dtype), _borrow: PhantomData }
    }

    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.inner.ptr.cast_mut()
    }

    pub fn as_ptr(&self) -> *const c_void {
        self.inner.ptr
    }

    pub fn len(&self) -> usize {
        self.inner.len
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    pub fn byte_len(&self) -> usize {
        self.inner.byte_len()
    }

    /// The same memory, read only, for as long as this borrow.
    pub fn as_slice(&self) -> DeviceSlice<'_> {
        self.inner
    }

    /// The same memory, writable, for as long as this borrow (to pass it to a call by value and
    /// keep it).
    pub fn reborrow(&mut self) -> DeviceSliceMut<'_> {
        DeviceSliceMut { inner: self.inner, _borrow: PhantomData }
    }
}

/// `len` u32 values in device memory: the device copies of the plan's arrays a CUDA context made
/// (`rmlp_context_set_plan`), as a device attention callback gets them, for the host's kernels.
#[derive(Clone, Copy, Debug)]
pub struct DeviceIndices<'a> {
    ptr: *const u32,
    len: usize,
    _borrow: PhantomData<&'a [u32]>,
}

// SAFETY: as DeviceSlice.
unsafe impl Send for DeviceIndices<'_> {}
unsafe impl Sync for DeviceIndices<'_> {}

impl<'a> DeviceIndices<'a> {
    /// `len` u32 values at `ptr`.
    ///
    /// # Safety
    /// As [`DeviceSlice::from_raw_parts`], for `len` u32 values.
    pub unsafe fn from_raw_parts(ptr: *const u32, len: usize) -> DeviceIndices<'a> {
        DeviceIndices { ptr, len, _borrow: PhantomData }
    }

    pub fn as_ptr(&self) -> *const u32 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A CUDA stream (`cudaStream_t`, the driver's `CUstream`) on which a context enqueues its work
/// ([`Context::set_stream`]), or the legacy default stream ([`Stream::LEGACY`], the null handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    raw: *mut c_void,
}

// SAFETY: a stream handle may be used from any thread (the CUDA runtime's own rule).
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// The legacy default stream (a null `cudaStream_t`), which every context starts on.
    pub const LEGACY: Stream = Stream { raw: core::ptr::null_mut() };

    /// The stream `raw` (null: [`Stream::LEGACY`]).
    ///
    /// # Safety
    /// `raw` must be null or a live stream of the device of the models whose contexts it is set
    /// on, and stay live while any of them may enqueue work on it: until another stream is set on
    /// each, or each is dropped.
    pub unsafe fn from_raw(raw: *mut c_void) -> Stream {
        Stream { raw }
    }

    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }
}

impl Default for Stream {
    fn default() -> Stream {
        Stream::LEGACY
    }
}
