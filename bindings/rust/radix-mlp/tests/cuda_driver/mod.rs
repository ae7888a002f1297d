//! The CUDA driver API (`libcuda.so.1`, loaded at run time: the test binary links nothing of CUDA
//! and builds where there is none), as a candle-style host uses it: the device's primary context,
//! a non-blocking stream, device allocations of f32 it owns, and copies on that stream. Only what
//! tests/device_buffers.rs needs; a missing driver is `Err` with the reason (the test then skips).
#![allow(dead_code)]
use core::ffi::{c_char, c_int, c_void, CStr};

use radix_mlp::{DType, DeviceSlice, DeviceSliceMut, Stream};

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type CuResult = c_int;
type Ptr = u64; // CUdeviceptr

/// The entry points, resolved once.
struct Api {
    init: unsafe extern "C" fn(u32) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut Ptr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(Ptr) -> CuResult,
    htod_async: unsafe extern "C" fn(Ptr, *const c_void, usize, *mut c_void) -> CuResult,
    dtoh_async: unsafe extern "C" fn(*mut c_void, Ptr, usize, *mut c_void) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, u32) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> CuResult,
    stream_destroy: unsafe extern "C" fn(*mut c_void) -> CuResult,
    error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

/// Device 0's primary context (the one the CUDA runtime, hence the library, uses) made current on
/// the calling thread, and a non-blocking stream on it.
pub struct Driver {
    api: Api,
    stream: *mut c_void,
}

macro_rules! symbol {
    ($lib:expr, $name:literal) => {{
        // SAFETY: a NUL-terminated name; the symbol, when found, has the driver API's signature
        // (the field's type, checked against cuda.h by hand).
        let f = unsafe { dlsym($lib, concat!($name, "\0").as_ptr().cast()) };
        if f.is_null() {
            return Err(format!("libcuda.so.1 has no {}", $name));
        }
        #[allow(clippy::missing_transmute_annotations)] // the target is the field's type
        unsafe {
            core::mem::transmute::<*mut c_void, _>(f)
        }
    }};
}

impl Driver {
    /// Loads the driver and sets device 0's primary context current; `Err` says why not.
    pub fn new() -> Result<Driver, String> {
        // SAFETY: a NUL-terminated name.
        let lib = unsafe { dlopen(c"libcuda.so.1".as_ptr(), RTLD_NOW) };
        if lib.is_null() {
            return Err("libcuda.so.1 (the CUDA driver) does not load".into());
        }
        let api = Api {
            init: symbol!(lib, "cuInit"),
            device_get: symbol!(lib, "cuDeviceGet"),
            primary_ctx_retain: symbol!(lib, "cuDevicePrimaryCtxRetain"),
            ctx_set_current: symbol!(lib, "cuCtxSetCurrent"),
            mem_alloc: symbol!(lib, "cuMemAlloc_v2"),
            mem_free: symbol!(lib, "cuMemFree_v2"),
            htod_async: symbol!(lib, "cuMemcpyHtoDAsync_v2"),
            dtoh_async: symbol!(lib, "cuMemcpyDtoHAsync_v2"),
            stream_create: symbol!(lib, "cuStreamCreate"),
            stream_synchronize: symbol!(lib, "cuStreamSynchronize"),
            stream_destroy: symbol!(lib, "cuStreamDestroy_v2"),
            error_name: symbol!(lib, "cuGetErrorName"),
        };
        let mut driver = Driver { api, stream: core::ptr::null_mut() };
        let (mut device, mut context) = (0, core::ptr::null_mut());
        // SAFETY: plain driver calls with valid out pointers.
        unsafe {
            driver.check("cuInit", (driver.api.init)(0))?;
            driver.check("cuDeviceGet", (driver.api.device_get)(&mut device, 0))?;
            driver.check("cuDevicePrimaryCtxRetain", (driver.api.primary_ctx_retain)(&mut context, device))?;
            driver.check("cuCtxSetCurrent", (driver.api.ctx_set_current)(context))?;
            let mut stream = core::ptr::null_mut();
            // 1: CU_STREAM_NON_BLOCKING
            driver.check("cuStreamCreate", (driver.api.stream_create)(&mut stream, 1))?;
            driver.stream = stream;
        }
        Ok(driver)
    }

    fn check(&self, what: &str, code: CuResult) -> Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        let mut name = core::ptr::null();
        // SAFETY: an out pointer; the driver returns a static string.
        let name = if unsafe { (self.api.error_name)(code, &mut name) } == 0 && !name.is_null() {
            unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
        } else {
            format!("error {code}")
        };
        Err(format!("{what}: {name}"))
    }

    fn must(&self, what: &str, code: CuResult) {
        self.check(what, code).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The stream every copy of this driver runs on, for the contexts of the test.
    pub fn stream(&self) -> Stream {
        // SAFETY: a live stream of device 0, destroyed only when the driver is dropped, after the
        // contexts that use it (the tests drop them first).
        unsafe { Stream::from_raw(self.stream) }
    }

    pub fn synchronize(&self) {
        // SAFETY: a live stream.
        self.must("cuStreamSynchronize", unsafe { (self.api.stream_synchronize)(self.stream) });
    }

    /// `data` on the device (its own allocation), the copy complete on return.
    pub fn upload(&self, data: &[f32]) -> DeviceBuf<'_> {
        let buf = self.alloc(data.len());
        self.copy_in(&buf, data);
        buf
    }

    /// Overwrites `buf` with `data` (the copy ordered on the stream, complete on return).
    pub fn copy_in(&self, buf: &DeviceBuf<'_>, data: &[f32]) {
        assert!(data.len() <= buf.len);
        // SAFETY: `buf` holds at least data.len() floats; the host buffer outlives the copy (synchronised).
        self.must("cuMemcpyHtoDAsync", unsafe {
            (self.api.htod_async)(buf.ptr, data.as_ptr().cast(), 4 * data.len(), self.stream)
        });
        self.synchronize();
    }

    /// `n` floats on the device (their contents undefined).
    pub fn alloc(&self, n: usize) -> DeviceBuf<'_> {
        let mut ptr = 0;
        // SAFETY: an out pointer; at least one byte, so a zero-length buffer still has an address.
        self.must("cuMemAlloc", unsafe { (self.api.mem_alloc)(&mut ptr, (4 * n).max(4)) });
        DeviceBuf { driver: self, ptr, len: n }
    }

    /// The first `n` floats at `ptr` on the device, after everything enqueued on the stream.
    pub fn download_raw(&self, ptr: *const c_void, n: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; n];
        // SAFETY: `ptr` holds at least `n` floats of device memory (the caller's word); `out` has `n`.
        self.must("cuMemcpyDtoHAsync", unsafe {
            (self.api.dtoh_async)(out.as_mut_ptr().cast(), ptr as Ptr, 4 * n, self.stream)
        });
        self.synchronize();
        out
    }

    pub fn download(&self, buf: &DeviceBuf<'_>) -> Vec<f32> {
        self.download_raw(buf.ptr as *const c_void, buf.len)
    }

    /// Copies `data` to device memory at `ptr` on `stream`, where the library's next work reads
    /// it; returns once the host buffer may be reused (pageable memory is staged before return).
    pub fn upload_raw(&self, ptr: *mut c_void, data: &[f32], stream: Stream) {
        // SAFETY: `ptr` has room for data.len() floats of device memory (the caller's word).
        self.must("cuMemcpyHtoDAsync", unsafe {
            (self.api.htod_async)(ptr as Ptr, data.as_ptr().cast(), 4 * data.len(), stream.as_raw())
        });
        // SAFETY: a live stream (the library's, inside its callback).
        self.must("cuStreamSynchronize", unsafe { (self.api.stream_synchronize)(stream.as_raw()) });
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: the stream is ours, and the contexts that used it are gone.
        unsafe { (self.api.stream_destroy)(self.stream) };
    }
}

/// `len` f32 on the device, freed on drop: a host's own tensor.
pub struct DeviceBuf<'d> {
    driver: &'d Driver,
    ptr: Ptr,
    pub len: usize,
}

impl DeviceBuf<'_> {
    pub fn ptr(&self) -> *const c_void {
        self.ptr as *const c_void
    }

    pub fn slice(&self) -> DeviceSlice<'_> {
        // SAFETY: our allocation of `len` f32, alive while borrowed.
        unsafe { DeviceSlice::from_raw_parts(self.ptr(), self.len, DType::F32) }
    }

    pub fn slice_mut(&mut self) -> DeviceSliceMut<'_> {
        // SAFETY: our allocation of `len` f32, alive and not otherwise used while borrowed mutably.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr as *mut c_void, self.len, DType::F32) }
    }
}

impl Drop for DeviceBuf<'_> {
    fn drop(&mut self) {
        // The stream may still read it: wait first.
        self.driver.synchronize();
        // SAFETY: our allocation, freed once.
        unsafe { (self.driver.api.mem_free)(self.ptr) };
    }
}
