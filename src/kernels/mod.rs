//! Kernels per device type, attached to the device-independent operator definitions of
//! `op/` (MXNet's `FCompute<cpu>` / `FCompute<gpu>`): CPU kernels in Rust under `cpu/`;
//! a GPU backend registers its kernels in the same table under `DeviceType::Gpu`.

pub mod cpu;
pub mod gpu;

use crate::context::{no_gpu_error, num_gpus, Context, DeviceType};
use crate::error::{Error, Result};
use crate::ndarray::{track_borrows, TBlob};
use crate::op::{OpContext, OpReq, Operator};
use std::any::TypeId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// A device's kernel for one operator type: computes `outputs` from `inputs` as `req`
/// says, with the operator's parsed attributes in `op`.
pub type KernelFn = fn(
    op: &dyn Operator,
    ctx: &mut OpContext,
    inputs: &[TBlob],
    outputs: &[TBlob],
    req: &[OpReq],
) -> Result<()>;

/// The arrays of one kernel call: what it reads, what it writes, and how each output is
/// written (`req[i]` goes with `outputs[i]`).
#[derive(Clone, Copy)]
pub struct Blobs<'a> {
    pub inputs: &'a [TBlob],
    pub outputs: &'a [TBlob],
    pub req: &'a [OpReq],
}

impl<'a> Blobs<'a> {
    pub fn new(inputs: &'a [TBlob], outputs: &'a [TBlob], req: &'a [OpReq]) -> Self {
        Blobs {
            inputs,
            outputs,
            req,
        }
    }
}

/// Which kernel table a device uses: every host-memory device type shares the CPU one.
fn device_class(dev: DeviceType) -> DeviceType {
    match dev {
        DeviceType::Gpu => DeviceType::Gpu,
        DeviceType::Cpu | DeviceType::CpuPinned | DeviceType::CpuShared => DeviceType::Cpu,
    }
}

/// Hashes a table key by folding the words written to it: a `TypeId` is already a hash,
/// so the lookup on every push skips a general-purpose hash.
#[derive(Default)]
struct FoldHasher(u64);

impl Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// The kernels of every device type, by the operator's Rust type.
#[derive(Default)]
pub struct Kernels {
    table: HashMap<(TypeId, DeviceType), KernelFn, BuildHasherDefault<FoldHasher>>,
}

impl Kernels {
    /// Registers `f` as the kernel of operator type `O` on `dev` devices.
    pub fn add<O: Operator>(&mut self, dev: DeviceType, f: KernelFn) {
        let prev = self.table.insert((TypeId::of::<O>(), device_class(dev)), f);
        assert!(
            prev.is_none(),
            "{} kernel registered twice for {}",
            dev.name(),
            std::any::type_name::<O>()
        );
    }

    fn get(&self, op: &dyn Operator, dev: DeviceType) -> Option<KernelFn> {
        self.table
            .get(&(op.as_any().type_id(), device_class(dev)))
            .copied()
    }
}

fn table() -> &'static Kernels {
    static TABLE: OnceLock<Kernels> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut k = Kernels::default();
        cpu::register_kernels(&mut k);
        gpu::register_kernels(&mut k);
        k
    })
}

/// The kernel of `op` for `ctx`'s device type, or an error naming both.
pub fn kernel_for(op: &dyn Operator, ctx: Context) -> Result<KernelFn> {
    lookup(table(), op, ctx)
}

fn lookup(table: &Kernels, op: &dyn Operator, ctx: Context) -> Result<KernelFn> {
    let kernel = table.get(op, ctx.dev_type).ok_or_else(|| {
        Error::NotImplemented(format!(
            "{}: no kernel for {} devices (array on {ctx})",
            op.name(),
            ctx.dev_type.name()
        ))
        .in_op(op.name())
    })?;
    if ctx.dev_type == DeviceType::Gpu
        && usize::try_from(ctx.dev_id).map_or(true, |id| id >= num_gpus())
    {
        return Err(no_gpu_error(ctx).in_op(op.name()));
    }
    Ok(kernel)
}

/// True if `op` has a kernel for `dev` devices.
pub fn has_kernel(op: &dyn Operator, dev: DeviceType) -> bool {
    table().get(op, dev).is_some()
}

/// Calls `kernel` of `op` with its borrows checked, a CPU kernel with the threads the
/// machine's load leaves free (`engine::run_cpu_kernel`); a panic inside the kernel (a
/// kernel bug) becomes an error naming the op, so the engine can store it on the outputs.
pub fn call_kernel(
    kernel: KernelFn,
    op: &dyn Operator,
    ctx: &mut OpContext,
    inputs: &[TBlob],
    outputs: &[TBlob],
    req: &[OpReq],
) -> Result<()> {
    let dev = ctx.device.dev_type;
    let run = std::panic::AssertUnwindSafe(|| {
        let call = move || {
            track_borrows(inputs, outputs, move || {
                kernel(op, ctx, inputs, outputs, req)
            })
        };
        if device_class(dev) == DeviceType::Cpu {
            let elements = inputs.iter().chain(outputs).map(TBlob::size).sum();
            crate::engine::run_cpu_kernel(elements, call)
        } else {
            call()
        }
    });
    std::panic::catch_unwind(run).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the kernel panicked".to_string());
        Err(Error::Runtime(msg).in_op(op.name()))
    })
}

/// Runs `op`'s kernel for `ctx.device` now, on the calling thread, prefixing errors with
/// the op's name.
pub fn run_kernel(op: &dyn Operator, ctx: &mut OpContext, io: Blobs) -> Result<()> {
    let f = kernel_for(op, ctx.device)?;
    call_kernel(f, op, ctx, io.inputs, io.outputs, io.req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{find, Attrs};

    fn build(name: &str) -> crate::op::OpRef {
        find(name).unwrap().build(&Attrs::new()).unwrap()
    }

    #[test]
    fn every_host_device_type_finds_the_cpu_kernel() {
        let op = build("topk");
        for dev in [
            DeviceType::Cpu,
            DeviceType::CpuPinned,
            DeviceType::CpuShared,
        ] {
            assert!(has_kernel(op.as_ref(), dev));
        }
    }

    #[test]
    fn an_operator_without_a_kernel_for_the_device_is_named_with_it() {
        // A table with only a CPU kernel stands for an operator not yet written for GPUs.
        let mut cpu_only = Kernels::default();
        cpu_only.add::<crate::op::elemwise::unary::Unary>(DeviceType::Cpu, |_, _, _, _, _| Ok(()));
        let op = build("exp");
        assert!(lookup(&cpu_only, op.as_ref(), Context::cpu(0)).is_ok());
        let e = lookup(&cpu_only, op.as_ref(), Context::gpu(1))
            .err()
            .unwrap();
        assert_eq!(e.kind(), crate::error::ErrorKind::NotImplemented);
        assert_eq!(
            e.message(),
            "exp: no kernel for gpu devices (array on gpu(1))"
        );
        assert!(matches!(e, Error::Op(ref o) if o.op == "exp"));
    }

    #[test]
    fn every_operator_with_a_cpu_kernel_has_a_gpu_kernel() {
        let (mut cpu, mut gpu) = (0, 0);
        for def in crate::op::list_ops() {
            if let Ok(op) = def.build(&Attrs::new()) {
                cpu += has_kernel(op.as_ref(), DeviceType::Cpu) as usize;
                gpu += has_kernel(op.as_ref(), DeviceType::Gpu) as usize;
                assert_eq!(
                    has_kernel(op.as_ref(), DeviceType::Cpu),
                    has_kernel(op.as_ref(), DeviceType::Gpu),
                    "{}",
                    def.name
                );
            }
        }
        assert!(cpu > 100 && cpu == gpu);
    }

    #[test]
    fn a_device_without_a_kernel_is_an_error_naming_op_and_device() {
        let op = build("exp");
        let e = kernel_for(op.as_ref(), Context::gpu(0)).err().unwrap();
        assert_eq!(
            e.message(),
            "exp: gpu(0): rsmx was not given a GPU: no CUDA driver found"
        );
        let e = crate::imperative::invoke(&op, &[], None, Some(Context::gpu(0)), false)
            .err()
            .unwrap();
        assert!(e.message().starts_with("exp: gpu(0)"), "{e}");
    }

    #[test]
    fn every_backward_operator_has_a_cpu_kernel() {
        use crate::op::grad::{tests::forward_attrs, BACKWARD_OPS};
        for &(name, forward, _, _) in BACKWARD_OPS {
            let op = find(name).unwrap().build(&forward_attrs(forward)).unwrap();
            assert!(has_kernel(op.as_ref(), DeviceType::Cpu), "{name}");
        }
        let nn = crate::op::nn::BACKWARD_OPS;
        for &(name, forward, _, _) in nn {
            let attrs = crate::op::nn::tests::forward_attrs(forward);
            let op = find(name).unwrap().build(&attrs).unwrap();
            assert!(has_kernel(op.as_ref(), DeviceType::Cpu), "{name}");
        }
    }

    #[test]
    fn every_registered_operator_has_a_cpu_kernel() {
        // Operators that build without attributes; the others are covered by their tests.
        let mut checked = 0;
        for def in crate::op::list_ops() {
            if let Ok(op) = def.build(&Attrs::new()) {
                // A composite runs as its parts, which have kernels of their own.
                assert!(
                    has_kernel(op.as_ref(), DeviceType::Cpu) || op.as_composite().is_some(),
                    "{}",
                    def.name
                );
                checked += 1;
            }
        }
        assert!(
            checked > 100,
            "only {checked} operators built without attributes"
        );
    }
}
