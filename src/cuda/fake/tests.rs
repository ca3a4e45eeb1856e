//! The fake driver through the driver table: memory, stream order, events across
//! streams, counters, injected faults and refused calls, and kernels built for the host
//! (loading, arguments, order, sticky errors).

use super::*;
use crate::cu;
use crate::cuda::driver::{Driver, EVENT_DISABLE_TIMING, STREAM_NON_BLOCKING, SYMBOLS};
use crate::error::{Error, ErrorKind};
use std::sync::mpsc::channel;

/// `cu!` for tests, which pass only live handles from the fake driver and pointers to
/// live buffers.
macro_rules! call {
    ($($t:tt)*) => {
        // SAFETY: see above.
        unsafe { cu!($($t)*) }
    };
}

fn stream(d: &Driver) -> Handle {
    let mut s: Handle = std::ptr::null_mut();
    call!(d, stream_create(&mut s, STREAM_NON_BLOCKING, 0)).unwrap();
    s
}

fn event(d: &Driver) -> Handle {
    let mut e: Handle = std::ptr::null_mut();
    call!(d, event_create(&mut e, EVENT_DISABLE_TIMING)).unwrap();
    e
}

fn device_alloc(d: &Driver, bytes: usize) -> CuDevicePtr {
    let mut p: CuDevicePtr = 0;
    call!(d, mem_alloc(&mut p, bytes)).unwrap();
    p
}

#[test]
fn bytes_go_to_the_device_and_back_in_stream_order() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    let before = stats();
    let s = stream(&d);
    let src: Vec<u8> = (0..=255).collect();
    let mut back = vec![0u8; 256];
    let a = device_alloc(&d, 256);
    let b = device_alloc(&d, 256);
    call!(&d, memcpy_htod_async(a, src.as_ptr().cast(), 256, s)).unwrap();
    call!(&d, memcpy_dtod_async(b, a, 256, s)).unwrap();
    call!(&d, memset_d8_async(b, 7, 16, s)).unwrap();
    call!(&d, memcpy_dtoh_async(back.as_mut_ptr().cast(), b, 256, s)).unwrap();
    call!(&d, stream_synchronize(s)).unwrap();
    assert_eq!(&back[..16], &[7u8; 16]);
    assert_eq!(&back[16..], &src[16..]);
    call!(&d, mem_free(a)).unwrap();
    call!(&d, mem_free(b)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
    let after = stats();
    assert_eq!(after.allocs - before.allocs, 2);
    assert_eq!(after.frees - before.frees, 2);
    assert_eq!(after.host_syncs - before.host_syncs, 1);
}

#[test]
fn a_read_on_another_stream_waits_for_the_writers_event() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    let (writer, reader) = (stream(&d), stream(&d));
    let (written, read) = (event(&d), event(&d));
    let buf = device_alloc(&d, 64);
    let mut host = vec![0u8; 64];
    // Hold the writer back until the reader's work is queued.
    let (open, gate) = channel::<()>();
    let hold = move || {
        let _ = gate.recv();
    };
    // SAFETY: `writer` is a live stream.
    assert_eq!(unsafe { enqueue(writer, hold) }, 0);
    call!(&d, memset_d8_async(buf, 9, 64, writer)).unwrap();
    call!(&d, event_record(written, writer)).unwrap();
    call!(&d, stream_wait_event(reader, written, 0)).unwrap();
    call!(
        &d,
        memcpy_dtoh_async(host.as_mut_ptr().cast(), buf, 64, reader)
    )
    .unwrap();
    call!(&d, event_record(read, reader)).unwrap();
    let not_ready = call!(&d, event_query(read)).unwrap_err();
    assert_eq!(not_ready.cuda_call().unwrap().name, "CUDA_ERROR_NOT_READY");
    let syncs = stats().host_syncs;
    open.send(()).unwrap();
    call!(&d, event_synchronize(read)).unwrap();
    assert_eq!(stats().host_syncs - syncs, 1);
    assert_eq!(host, vec![9u8; 64]);
    call!(&d, event_query(written)).unwrap();
    for e in [written, read] {
        call!(&d, event_destroy(e)).unwrap();
    }
    for s in [writer, reader] {
        call!(&d, stream_destroy(s)).unwrap();
    }
    call!(&d, mem_free(buf)).unwrap();
}

#[test]
fn an_injected_out_of_memory_is_a_clean_error_once() {
    let _g = TEST_LOCK.lock();
    let d = driver();
    fail_next_alloc();
    let mut p: CuDevicePtr = 0;
    let e = call!(&d, mem_alloc(&mut p, 1024)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(
        e.to_string(),
        "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (code 2)"
    );
    let p = device_alloc(&d, 1024);
    call!(&d, mem_free(p)).unwrap();
}

#[test]
fn refused_calls_name_the_call() {
    let d = driver();
    let e = call!(&d, memset_d8_async(0, 0, 0, std::ptr::null_mut())).unwrap_err();
    assert_eq!(e.cuda_call().unwrap().call, "cuMemsetD8Async");
    assert_eq!(e.cuda_call().unwrap().name, "CUDA_ERROR_INVALID_HANDLE");
    let e = call!(&d, mem_free(12345)).unwrap_err();
    assert_eq!(e.cuda_call().unwrap().name, "CUDA_ERROR_INVALID_VALUE");
    let mut ctx: Handle = std::ptr::null_mut();
    call!(&d, primary_ctx_retain(&mut ctx, 1)).unwrap();
    assert!(!ctx.is_null());
    call!(&d, ctx_set_current(ctx)).unwrap();
    // A code the driver cannot name still makes an error.
    assert_eq!(
        d.check("cuLaunchKernel", 999).unwrap_err().to_string(),
        "cuLaunchKernel failed: CUDA error 999 (code 999)"
    );
}

#[test]
fn a_table_from_addresses_names_every_missing_symbol() {
    let mut addresses: HashMap<String, usize> =
        SYMBOLS.iter().map(|s| (s.to_string(), 0)).collect();
    // SAFETY: the table is refused before any address is used.
    let e = unsafe { Driver::from_symbols(&addresses) }.err().unwrap();
    assert!(
        matches!(&e, Error::Runtime(m) if m.contains("cuMemAlloc_v2") && m.contains("cuEventQuery"))
    );
    let d = driver();
    addresses.insert("cuGetErrorName".into(), d.get_error_name as usize);
    addresses.remove("cuStreamSynchronize");
    // SAFETY: as above.
    let e = unsafe { Driver::from_symbols(&addresses) }.err().unwrap();
    assert!(!e.to_string().contains("cuGetErrorName"), "{e}");
    assert!(e.to_string().contains("cuStreamSynchronize"), "{e}");
}

/// Test kernels, built for the host as `rsmx.cuda.host` builds rsmx's modules.
const KERNELS: &str = r#"
extern "C" __global__ void add_scalar(float* out, const float* in, long long n, float s) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x)
    out[i] = in[i] + s;
}
// Appends `v` to `log` at `*next`, from one thread of the grid.
extern "C" __global__ void append(int* log, int* next, int v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) log[(*next)++] = v;
}
// Only the first thread reaches the barrier, so the launch fails.
extern "C" __global__ void divergent(int* out) {
  if (threadIdx.x == 0) __syncthreads();
  out[threadIdx.x] = 1;
}
"#;

/// The kernel table, as `rsmx.cuda.host` generates it.
const TABLE: &str = r#"#include "kernels.cu"
#define ENTRY(k)                                                              \
  {#k, [](void** p) { rsmx_host::call_with(k, p); },                          \
   [](std::size_t* s, int max) { return rsmx_host::param_sizes(k, s, max); }, \
   {0}},
namespace {
rsmx_host::Kernel kernels[] = {ENTRY(add_scalar) ENTRY(append) ENTRY(divergent)};
constexpr std::size_t count = sizeof kernels / sizeof *kernels;
}  // namespace
extern "C" int rsmx_host_launch(const char* name, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, std::size_t smem,
                                void** params, int order, unsigned seed) {
  return rsmx_host::launch_named(kernels, count, name, dim3(gx, gy, gz), dim3(bx, by, bz),
                                 smem, params, order, seed);
}
extern "C" int rsmx_host_param_sizes(const char* name, std::size_t* sizes, int max) {
  return rsmx_host::param_sizes_named(kernels, count, name, sizes, max);
}
"#;

/// The test kernels' library and one that lacks the entry points, built once per content
/// under the temporary directory; `None` (with a note) where there is no g++.
fn host_libraries() -> Option<&'static (String, String)> {
    use std::hash::{Hash, Hasher};
    use std::path::Path;
    use std::process::Command;
    static LIBS: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
    LIBS.get_or_init(|| {
        let header_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/rsmx/cuda/host");
        let header = std::fs::read_to_string(header_dir.join("cuda_host.h")).unwrap();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (KERNELS, TABLE, &header).hash(&mut h);
        let dir = std::env::temp_dir().join(format!("rsmx-fake-kernels-{:016x}", h.finish()));
        let (lib, bare) = (dir.join("kernels.so"), dir.join("bare.so"));
        let names = || {
            let s = |p: &Path| p.to_str().unwrap().to_string();
            Some((s(&lib), s(&bare)))
        };
        if lib.is_file() && bare.is_file() {
            return names();
        }
        // Build beside the entries, then rename them in, so concurrent runs never see
        // half a library.
        let work = dir.join(format!("build-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("kernels.cu"), KERNELS).unwrap();
        std::fs::write(work.join("table.cpp"), TABLE).unwrap();
        std::fs::write(
            work.join("bare.cpp"),
            "extern \"C\" int rsmx_nothing() { return 0; }\n",
        )
        .unwrap();
        for (source, out) in [("table.cpp", "kernels.so"), ("bare.cpp", "bare.so")] {
            let run = Command::new("g++")
                .args([
                    "-std=c++17",
                    "-O2",
                    "-shared",
                    "-fPIC",
                    "-include",
                    "cuda_host.h",
                ])
                .arg(format!("-I{}", work.display()))
                .arg(format!("-I{}", header_dir.display()))
                .arg("-o")
                .arg(work.join(out))
                .arg(work.join(source))
                .output();
            let run = match run {
                Ok(run) => run,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    eprintln!("note: no g++, so the fake driver's kernel tests are skipped");
                    return None;
                }
                Err(e) => panic!("g++: {e}"),
            };
            assert!(
                run.status.success(),
                "g++ failed:\n{}",
                String::from_utf8_lossy(&run.stderr)
            );
        }
        std::fs::rename(work.join("kernels.so"), &lib).unwrap();
        std::fs::rename(work.join("bare.so"), &bare).unwrap();
        let _ = std::fs::remove_dir_all(&work);
        names()
    })
    .as_ref()
}

fn load(d: &Driver, path: &str) -> crate::error::Result<Handle> {
    let image = std::ffi::CString::new(path).unwrap();
    let mut m: Handle = std::ptr::null_mut();
    call!(d, module_load_data(&mut m, image.as_ptr().cast()))?;
    Ok(m)
}

fn function(d: &Driver, m: Handle, name: &str) -> crate::error::Result<Handle> {
    let name = std::ffi::CString::new(name).unwrap();
    let mut f: Handle = std::ptr::null_mut();
    call!(d, module_get_function(&mut f, m, name.as_ptr()))?;
    Ok(f)
}

/// A kernel argument: the address of the value, as `cuLaunchKernel` takes it.
fn arg<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast()
}

fn launch(
    d: &Driver,
    f: Handle,
    grid: u32,
    block: u32,
    s: Handle,
    args: &mut [*mut c_void],
) -> crate::error::Result<()> {
    let (extra, params) = (std::ptr::null_mut(), args.as_mut_ptr());
    call!(
        d,
        launch_kernel(f, grid, 1, 1, block, 1, 1, 0, s, params, extra)
    )
}

fn error_name(r: crate::error::Result<impl Sized>) -> String {
    r.err().unwrap().cuda_call().unwrap().name.clone()
}

/// Clears the sticky error when a test that may leave one ends, passed or not.
struct ClearSticky;

impl Drop for ClearSticky {
    fn drop(&mut self) {
        clear_sticky_error();
    }
}

/// Copies `n` floats from the device.
fn read_f32(d: &Driver, s: Handle, p: CuDevicePtr, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    call!(d, memcpy_dtoh_async(out.as_mut_ptr().cast(), p, n * 4, s)).unwrap();
    call!(d, stream_synchronize(s)).unwrap();
    out
}

#[test]
fn a_host_library_loads_and_names_its_kernels() {
    let Some((lib, bare)) = host_libraries() else {
        return;
    };
    let d = driver();
    let m = load(&d, lib).unwrap();
    let f = function(&d, m, "add_scalar").unwrap();
    assert!(!f.is_null());
    assert_eq!(function(&d, m, "add_scalar").unwrap(), f);
    assert_ne!(function(&d, m, "append").unwrap(), f);
    assert_eq!(
        error_name(function(&d, m, "no_such_kernel")),
        "CUDA_ERROR_NOT_FOUND"
    );
    call!(&d, module_unload(m)).unwrap();
    // Not a library, no such file, a library without the entry points: none loads.
    let text = std::env::temp_dir().join(format!("rsmx-not-a-library-{}", std::process::id()));
    std::fs::write(&text, "not a library").unwrap();
    for path in [text.to_str().unwrap(), "/no/such/library.so", bare.as_str()] {
        assert_eq!(
            error_name(load(&d, path)),
            "CUDA_ERROR_INVALID_IMAGE",
            "{path}"
        );
    }
    let _ = std::fs::remove_file(text);
}

#[test]
fn a_launch_copies_its_arguments_when_queued() {
    let Some((lib, _)) = host_libraries() else {
        return;
    };
    let _g = TEST_LOCK.lock();
    let d = driver();
    let s = stream(&d);
    let m = load(&d, lib).unwrap();
    let f = function(&d, m, "add_scalar").unwrap();
    let n = 1000usize;
    let input: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (mut x, mut y) = (device_alloc(&d, n * 4), device_alloc(&d, n * 4));
    call!(&d, memcpy_htod_async(x, input.as_ptr().cast(), n * 4, s)).unwrap();
    let launches = stats().launches;
    // Hold the stream so that the kernel runs after the arguments have changed.
    let (open, gate) = channel::<()>();
    // SAFETY: `s` is a live stream.
    assert_eq!(
        unsafe {
            enqueue(s, move || {
                let _ = gate.recv();
            })
        },
        0
    );
    let (mut len, mut scalar) = (n as i64, 1.5f32);
    let mut args = [arg(&mut y), arg(&mut x), arg(&mut len), arg(&mut scalar)];
    launch(&d, f, 2, 128, s, &mut args).unwrap();
    assert_eq!(stats().launches - launches, 1);
    (len, scalar) = (10, 100.0);
    (x, y) = (y, x);
    open.send(()).unwrap();
    let got = read_f32(&d, s, x, n);
    let want: Vec<f32> = input.iter().map(|v| v + 1.5).collect();
    assert_eq!(got, want, "{len} {scalar} {y}");
    call!(&d, module_unload(m)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
    call!(&d, mem_free(x)).unwrap();
    call!(&d, mem_free(y)).unwrap();
}

#[test]
fn launches_keep_stream_order_and_wait_for_events_across_streams() {
    let Some((lib, _)) = host_libraries() else {
        return;
    };
    let _g = TEST_LOCK.lock();
    let d = driver();
    let (a, b) = (stream(&d), stream(&d));
    let (on_a, on_b) = (event(&d), event(&d));
    let m = load(&d, lib).unwrap();
    let append = function(&d, m, "append").unwrap();
    let (mut log, mut next) = (device_alloc(&d, 16), device_alloc(&d, 4));
    call!(&d, memset_d8_async(log, 0, 16, a)).unwrap();
    call!(&d, memset_d8_async(next, 0, 4, a)).unwrap();
    // Stream a is held until everything is queued; b's launch must still wait for a's.
    let (open, gate) = channel::<()>();
    // SAFETY: `a` is a live stream.
    assert_eq!(
        unsafe {
            enqueue(a, move || {
                let _ = gate.recv();
            })
        },
        0
    );
    let mut run = |s: Handle, v: i32| {
        let mut v = v;
        launch(
            &d,
            append,
            3,
            32,
            s,
            &mut [arg(&mut log), arg(&mut next), arg(&mut v)],
        )
        .unwrap();
    };
    run(a, 1);
    run(a, 2);
    call!(&d, event_record(on_a, a)).unwrap();
    call!(&d, stream_wait_event(b, on_a, 0)).unwrap();
    run(b, 3);
    call!(&d, event_record(on_b, b)).unwrap();
    call!(&d, stream_wait_event(a, on_b, 0)).unwrap();
    run(a, 4);
    assert_eq!(
        error_name(call!(&d, event_query(on_b))),
        "CUDA_ERROR_NOT_READY"
    );
    open.send(()).unwrap();
    let mut host = [0i32; 4];
    call!(&d, memcpy_dtoh_async(host.as_mut_ptr().cast(), log, 16, a)).unwrap();
    call!(&d, stream_synchronize(a)).unwrap();
    assert_eq!(host, [1, 2, 3, 4]);
    call!(&d, event_query(on_b)).unwrap();
    call!(&d, module_unload(m)).unwrap();
    for e in [on_a, on_b] {
        call!(&d, event_destroy(e)).unwrap();
    }
    for s in [a, b] {
        call!(&d, stream_destroy(s)).unwrap();
    }
    call!(&d, mem_free(log)).unwrap();
    call!(&d, mem_free(next)).unwrap();
}

#[test]
fn a_failed_kernel_is_a_sticky_error_until_cleared() {
    let Some((lib, _)) = host_libraries() else {
        return;
    };
    let _g = TEST_LOCK.lock();
    let _clear = ClearSticky;
    let d = driver();
    let s = stream(&d);
    let done = event(&d);
    let m = load(&d, lib).unwrap();
    let (divergent, add) = (
        function(&d, m, "divergent").unwrap(),
        function(&d, m, "add_scalar").unwrap(),
    );
    let mut out = device_alloc(&d, 64 * 4);
    // The failure shows when the work is waited for, not when it is queued.
    launch(&d, divergent, 1, 64, s, &mut [arg(&mut out)]).unwrap();
    call!(&d, event_record(done, s)).unwrap();
    let failed = "CUDA_ERROR_LAUNCH_FAILED";
    assert_eq!(error_name(call!(&d, event_synchronize(done))), failed);
    assert_eq!(error_name(call!(&d, event_query(done))), failed);
    assert_eq!(error_name(call!(&d, stream_synchronize(s))), failed);
    let (mut len, mut scalar, mut input) = (64i64, 1.0f32, out);
    let mut args = [
        arg(&mut out),
        arg(&mut input),
        arg(&mut len),
        arg(&mut scalar),
    ];
    let e = launch(&d, add, 1, 64, s, &mut args).unwrap_err();
    assert_eq!(e.cuda_call().unwrap().call, "cuLaunchKernel");
    assert_eq!(e.cuda_call().unwrap().name, failed);
    clear_sticky_error();
    call!(&d, memset_d8_async(out, 0, 64 * 4, s)).unwrap();
    launch(&d, add, 1, 64, s, &mut args).unwrap();
    assert_eq!(read_f32(&d, s, out, 64), vec![1.0f32; 64]);
    call!(&d, event_destroy(done)).unwrap();
    call!(&d, module_unload(m)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
    call!(&d, mem_free(out)).unwrap();
}

#[test]
fn an_injected_launch_failure_runs_nothing_once() {
    let Some((lib, _)) = host_libraries() else {
        return;
    };
    let _g = TEST_LOCK.lock();
    let d = driver();
    let s = stream(&d);
    let m = load(&d, lib).unwrap();
    let add = function(&d, m, "add_scalar").unwrap();
    let mut out = device_alloc(&d, 32 * 4);
    call!(&d, memset_d8_async(out, 0, 32 * 4, s)).unwrap();
    let (mut len, mut scalar, mut input) = (32i64, 2.0f32, out);
    let mut args = [
        arg(&mut out),
        arg(&mut input),
        arg(&mut len),
        arg(&mut scalar),
    ];
    let launches = stats().launches;
    fail_next_launch();
    let e = launch(&d, add, 1, 32, s, &mut args).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED (code 719)"
    );
    assert_eq!(stats().launches, launches);
    // Nothing ran, and nothing is left to fail later.
    assert_eq!(read_f32(&d, s, out, 32), vec![0.0f32; 32]);
    launch(&d, add, 1, 32, s, &mut args).unwrap();
    assert_eq!(read_f32(&d, s, out, 32), vec![2.0f32; 32]);
    assert_eq!(stats().launches - launches, 1);
    call!(&d, module_unload(m)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
    call!(&d, mem_free(out)).unwrap();
}

#[test]
fn launches_with_no_stream_or_a_bad_shape_are_refused() {
    let Some((lib, _)) = host_libraries() else {
        return;
    };
    let _g = TEST_LOCK.lock();
    let d = driver();
    let s = stream(&d);
    let m = load(&d, lib).unwrap();
    let divergent = function(&d, m, "divergent").unwrap();
    let launches = stats().launches;
    let mut out: CuDevicePtr = 0;
    let mut args = [arg(&mut out)];
    let null = std::ptr::null_mut();
    assert_eq!(
        error_name(launch(&d, divergent, 1, 32, null, &mut args)),
        "CUDA_ERROR_INVALID_HANDLE"
    );
    for (grid, block) in [(0, 32), (1, 0), (1, 2048)] {
        assert_eq!(
            error_name(launch(&d, divergent, grid, block, s, &mut args)),
            "CUDA_ERROR_INVALID_VALUE"
        );
    }
    let params = args.as_mut_ptr();
    let mut extra = [std::ptr::null_mut::<c_void>()];
    let e = call!(
        &d,
        launch_kernel(
            divergent,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            s,
            params,
            extra.as_mut_ptr()
        )
    );
    assert_eq!(error_name(e), "CUDA_ERROR_INVALID_VALUE");
    let e = call!(
        &d,
        launch_kernel(divergent, 1, 1, 1, 1, 1, 1, 0, s, null.cast(), null.cast())
    );
    assert_eq!(error_name(e), "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(stats().launches, launches);
    call!(&d, stream_synchronize(s)).unwrap();
    call!(&d, module_unload(m)).unwrap();
    call!(&d, stream_destroy(s)).unwrap();
}
