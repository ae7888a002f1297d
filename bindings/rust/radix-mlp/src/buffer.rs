//! The buffers a [`Context`]'s model calls take, in host or device memory: [`Buffer`] (read) and
//! [`BufferMut`] (written), which host slices of f32 (`&[f32]`, `&mut Vec<f32>`, ...) and device
//! slices ([`DeviceSlice`], [`DeviceSliceMut`]) convert into. One code path serves both: each call
//! checks every buffer against its model (host memory for a CPU model, device memory in the
//! model's dtype for a CUDA one, and the rows the call reads or writes) before the library sees
//! the pointer, so the CPU tests run the path the device takes.
use core::ffi::c_void;
use core::marker::PhantomData;

use crate::device::{DeviceSlice, DeviceSliceMut};
use crate::error::{Error, Status};
use crate::model::Model;
use crate::types::{DType, Device};
#[cfg(doc)] // the documentation links to it
use crate::Context;

/// Where a buffer lives: host memory (f32) or device memory (the dtype it says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    Host,
    Device(DType),
}

/// A buffer a call reads: a host slice of f32 or a [`DeviceSlice`] (`From` either).
#[derive(Clone, Copy, Debug)]
pub struct Buffer<'b> {
    ptr: *const c_void,
    len: usize,
    memory: Memory,
    _borrow: PhantomData<&'b [u8]>,
}

/// A buffer a call writes: a host slice of f32 or a [`DeviceSliceMut`] (`From` either).
#[derive(Debug)]
pub struct BufferMut<'b> {
    /// The memory, as a read would see it (its pointer came from a `*mut`).
    inner: Buffer<'b>,
    _borrow: PhantomData<&'b mut [u8]>,
}

impl<'b> BufferMut<'b> {
    fn new(ptr: *mut c_void, len: usize, memory: Memory) -> BufferMut<'b> {
        BufferMut { inner: Buffer { ptr, len, memory, _borrow: PhantomData }, _borrow: PhantomData }
    }
}

impl<'b> From<&'b [f32]> for Buffer<'b> {
    fn from(s: &'b [f32]) -> Buffer<'b> {
        Buffer { ptr: s.as_ptr().cast(), len: s.len(), memory: Memory::Host, _borrow: PhantomData }
    }
}

impl<'b> From<&'b Vec<f32>> for Buffer<'b> {
    fn from(s: &'b Vec<f32>) -> Buffer<'b> {
        Buffer::from(s.as_slice())
    }
}

impl<'b, const N: usize> From<&'b [f32; N]> for Buffer<'b> {
    fn from(s: &'b [f32; N]) -> Buffer<'b> {
        Buffer::from(s.as_slice())
    }
}

impl<'b> From<DeviceSlice<'b>> for Buffer<'b> {
    fn from(s: DeviceSlice<'b>) -> Buffer<'b> {
        Buffer { ptr: s.as_ptr(), len: s.len(), memory: Memory::Device(s.dtype()), _borrow: PhantomData }
    }
}

impl<'b> From<&'b DeviceSlice<'_>> for Buffer<'b> {
    fn from(s: &'b DeviceSlice<'_>) -> Buffer<'b> {
        Buffer { ptr: s.as_ptr(), len: s.len(), memory: Memory::Device(s.dtype()), _borrow: PhantomData }
    }
}

impl<'b> From<&'b DeviceSliceMut<'_>> for Buffer<'b> {
    fn from(s: &'b DeviceSliceMut<'_>) -> Buffer<'b> {
        Buffer::from(s.as_slice())
    }
}

impl<'b> From<&'b mut [f32]> for BufferMut<'b> {
    fn from(s: &'b mut [f32]) -> BufferMut<'b> {
        BufferMut::new(s.as_mut_ptr().cast(), s.len(), Memory::Host)
    }
}

impl<'b> From<&'b mut Vec<f32>> for BufferMut<'b> {
    fn from(s: &'b mut Vec<f32>) -> BufferMut<'b> {
        BufferMut::from(s.as_mut_slice())
    }
}

impl<'b, const N: usize> From<&'b mut [f32; N]> for BufferMut<'b> {
    fn from(s: &'b mut [f32; N]) -> BufferMut<'b> {
        BufferMut::from(s.as_mut_slice())
    }
}

impl<'b> From<DeviceSliceMut<'b>> for BufferMut<'b> {
    fn from(mut s: DeviceSliceMut<'b>) -> BufferMut<'b> {
        BufferMut::new(s.as_mut_ptr(), s.len(), Memory::Device(s.dtype()))
    }
}

impl<'b> From<&'b mut DeviceSliceMut<'_>> for BufferMut<'b> {
    fn from(s: &'b mut DeviceSliceMut<'_>) -> BufferMut<'b> {
        BufferMut::from(s.reborrow())
    }
}

impl Buffer<'_> {
    /// Elements (f32 in host memory, the slice's dtype on the device).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the buffer is device memory.
    pub fn is_device(&self) -> bool {
        matches!(self.memory, Memory::Device(_))
    }

    /// The pointer, once the buffer is `model`'s memory and holds `rows` x `width` elements.
    pub(crate) fn checked(
        &self,
        fn_name: &str,
        name: &str,
        model: &Model,
        rows: usize,
        width: usize,
    ) -> Result<*const c_void, Error> {
        check(fn_name, name, self.memory, self.len, model, rows, width)?;
        Ok(self.ptr)
    }
}

impl BufferMut<'_> {
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn is_device(&self) -> bool {
        self.inner.is_device()
    }

    /// As [`Buffer::checked`], writable.
    pub(crate) fn checked(
        &mut self,
        fn_name: &str,
        name: &str,
        model: &Model,
        rows: usize,
        width: usize,
    ) -> Result<*mut c_void, Error> {
        self.inner.checked(fn_name, name, model, rows, width).map(<*const c_void>::cast_mut)
    }
}

/// Err unless a buffer in `memory` of `len` elements is `model`'s memory (host f32 on the CPU,
/// device memory in the model's dtype on CUDA) and holds `rows` x `width` elements.
fn check(
    fn_name: &str,
    name: &str,
    memory: Memory,
    len: usize,
    model: &Model,
    rows: usize,
    width: usize,
) -> Result<(), Error> {
    let fail = |message: String| Err(Error::new(Status::InvalidArgument, format!("{fn_name}: {name} {message}")));
    match (model.device(), memory) {
        (Device::Cpu, Memory::Device(_)) => {
            return fail(
                "is device memory (a DeviceSlice), but the model runs on the CPU: pass a host f32 slice".into(),
            )
        }
        (Device::Cuda(i), Memory::Host) => {
            return fail(format!(
                "is a host slice, but the model runs on CUDA device {i}, whose activations are device memory in \
                 its dtype ({:?}): pass a DeviceSlice / DeviceSliceMut",
                model.dtype()
            ))
        }
        (Device::Cuda(_), Memory::Device(dtype)) if dtype != model.dtype() => {
            return fail(format!("holds {dtype:?} values, but the model computes in {:?}", model.dtype()))
        }
        _ => {}
    }
    if rows.checked_mul(width).is_some_and(|need| len >= need) {
        return Ok(());
    }
    let unit = match memory {
        Memory::Host => "floats".to_string(),
        Memory::Device(dtype) => format!("{dtype:?} values"),
    };
    fail(format!("has {len} {unit}, needs {rows} rows x {width}"))
}
