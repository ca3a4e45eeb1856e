//! The CUDA driver functions rsmx calls, as a table of typed function pointers: filled
//! from the addresses `rsmx.cuda` resolves with `cuGetProcAddress`, or by the fake driver
//! that runs on host memory. Nothing here links CUDA; every result is checked and a
//! failure becomes an `Error::Cuda` naming the call.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::ffi::{c_char, c_uint, c_void, CStr};

/// A driver result code (`CUresult`); 0 is success.
pub type CuResult = i32;
/// A device ordinal (`CUdevice`).
pub type CuDevice = i32;
/// A device address (`CUdeviceptr`).
pub type CuDevicePtr = u64;
/// An opaque driver handle (`CUcontext`, `CUstream`, `CUevent`).
pub type Handle = *mut c_void;

/// `CUDA_ERROR_NOT_READY`: an event or stream still has work pending.
pub const NOT_READY: CuResult = 600;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const OUT_OF_MEMORY: CuResult = 2;
/// `CU_STREAM_NON_BLOCKING`: no implicit ordering with the legacy NULL stream.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DISABLE_TIMING`.
pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CUDA_ERROR_NOT_FOUND`: a named symbol (kernel) is not in a module.
pub const NOT_FOUND: CuResult = 500;
/// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
pub const ATTRIBUTE_SM_COUNT: i32 = 16;

macro_rules! driver_table {
    ($($field:ident = $symbol:literal: fn($($arg:ty),*);)*) => {
        /// The driver entry points, one field per function.
        #[derive(Clone, Copy)]
        pub struct Driver {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
        }

        /// The driver symbols the table needs, as `cuGetProcAddress` names them.
        pub const SYMBOLS: &[&str] = &[$($symbol),*];

        /// The driver's name of each field's function, for errors.
        #[allow(non_upper_case_globals)]
        pub mod names {
            $(pub const $field: &str = $symbol;)*
        }

        impl Driver {
            /// The table from the address of every symbol in [`SYMBOLS`].
            ///
            /// # Safety
            /// Each address must be the driver's function of that name, with the ABI
            /// the field declares (the one `cuGetProcAddress` returns for CUDA 12.0).
            pub unsafe fn from_symbols(addresses: &HashMap<String, usize>) -> Result<Driver> {
                let missing: Vec<&str> = SYMBOLS
                    .iter()
                    .copied()
                    .filter(|s| addresses.get(*s).is_none_or(|&a| a == 0))
                    .collect();
                if !missing.is_empty() {
                    return Err(Error::Runtime(format!(
                        "the CUDA driver lacks {}",
                        missing.join(", ")
                    )));
                }
                Ok(Driver {
                    // SAFETY: the caller vouches for each address and its ABI; none is 0.
                    $($field: unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> CuResult>(addresses[$symbol]) },)*
                })
            }
        }
    };
}

driver_table! {
    get_error_name = "cuGetErrorName": fn(CuResult, *mut *const c_char);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut Handle, CuDevice);
    ctx_set_current = "cuCtxSetCurrent": fn(Handle);
    mem_alloc = "cuMemAlloc_v2": fn(*mut CuDevicePtr, usize);
    mem_free = "cuMemFree_v2": fn(CuDevicePtr);
    mem_get_info = "cuMemGetInfo_v2": fn(*mut usize, *mut usize);
    mem_host_alloc = "cuMemHostAlloc": fn(*mut *mut c_void, usize, c_uint);
    mem_free_host = "cuMemFreeHost": fn(*mut c_void);
    memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(CuDevicePtr, *const c_void, usize, Handle);
    memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2": fn(*mut c_void, CuDevicePtr, usize, Handle);
    memcpy_dtod_async = "cuMemcpyDtoDAsync_v2": fn(CuDevicePtr, CuDevicePtr, usize, Handle);
    memset_d8_async = "cuMemsetD8Async": fn(CuDevicePtr, u8, usize, Handle);
    stream_create = "cuStreamCreateWithPriority": fn(*mut Handle, c_uint, i32);
    stream_destroy = "cuStreamDestroy_v2": fn(Handle);
    stream_wait_event = "cuStreamWaitEvent": fn(Handle, Handle, c_uint);
    stream_synchronize = "cuStreamSynchronize": fn(Handle);
    event_create = "cuEventCreate": fn(*mut Handle, c_uint);
    event_record = "cuEventRecord": fn(Handle, Handle);
    event_query = "cuEventQuery": fn(Handle);
    event_synchronize = "cuEventSynchronize": fn(Handle);
    event_destroy = "cuEventDestroy_v2": fn(Handle);
    init = "cuInit": fn(c_uint);
    device_get_attribute = "cuDeviceGetAttribute": fn(*mut i32, i32, CuDevice);
    memcpy_peer_async = "cuMemcpyPeerAsync": fn(CuDevicePtr, Handle, CuDevicePtr, Handle, usize, Handle);
    module_load_data = "cuModuleLoadData": fn(*mut Handle, *const c_void);
    module_unload = "cuModuleUnload": fn(Handle);
    module_get_function = "cuModuleGetFunction": fn(*mut Handle, Handle, *const c_char);
    launch_kernel = "cuLaunchKernel": fn(
        Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle,
        *mut *mut c_void, *mut *mut c_void
    );
}

impl Driver {
    /// `Ok` for success, else the error naming `call` and the code's name.
    pub fn check(&self, call: &str, code: CuResult) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it null.
        let found = unsafe { (self.get_error_name)(code, &mut name) } == 0 && !name.is_null();
        let name = if found {
            // SAFETY: a non-null result is a NUL-terminated static string.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("CUDA error {code}")
        };
        Err(Error::cuda(call, code, &name))
    }
}

/// Calls a driver function through the table and checks its result:
/// `cu!(driver, mem_alloc(&mut ptr, bytes))`. The call is unsafe, so the macro goes in
/// an `unsafe` block whose comment says why the handles and pointers passed are valid.
#[macro_export]
macro_rules! cu {
    ($driver:expr, $field:ident($($arg:expr),* $(,)?)) => {{
        let d: &$crate::cuda::driver::Driver = $driver;
        d.check($crate::cuda::driver::names::$field, (d.$field)($($arg),*))
    }};
}
