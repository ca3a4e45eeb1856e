//! Memory of arrays dropped while ops on them were still queued, kept with its engine
//! variable for the next operator output of the same size on the same device. The
//! variable orders the output's first write after those ops (and, on a GPU, its events
//! order the device work), so a chain of small ops neither pushes a deletion through
//! the engine nor waits for one to land.

use crate::context::Context;
use crate::engine::{self, Var};
use crate::storage::Block;
use parking_lot::Mutex;
use std::collections::VecDeque;

/// Larger blocks go back through the pool: their ops take long enough that a deletion
/// costs nothing, and keeping them out of the pool would cost memory.
const MAX_BLOCK_BYTES: usize = 4 << 20;
/// At most this many blocks are kept, across devices; the oldest goes first.
const MAX_KEPT: usize = 32;

struct Kept {
    ctx: Context,
    block: Block,
    var: Var,
}

/// Blocks kept for reuse, oldest first.
struct Bin(Mutex<VecDeque<Kept>>);

static BIN: Bin = Bin(Mutex::new(VecDeque::new()));

impl Bin {
    /// Keeps `block` and `var` if the block is small enough; else gives them back.
    fn keep(&self, ctx: Context, block: Block, var: Var) -> Result<(), (Block, Var)> {
        if block.size() == 0 || block.size() > MAX_BLOCK_BYTES {
            return Err((block, var));
        }
        let evicted = {
            let mut kept = self.0.lock();
            kept.push_back(Kept { ctx, block, var });
            if kept.len() > MAX_KEPT {
                kept.pop_front()
            } else {
                None
            }
        };
        if let Some(old) = evicted {
            super::chunk::retire(old.ctx, Some(old.block), old.var);
        }
        Ok(())
    }

    /// The newest kept block of exactly `bytes` bytes on `ctx`, its variable handed over.
    fn take(&self, ctx: Context, bytes: usize) -> Option<(Block, Var)> {
        let k = {
            let mut kept = self.0.lock();
            let i = kept
                .iter()
                .rposition(|k| k.ctx == ctx && k.block.size() == bytes)?;
            kept.remove(i)?
        };
        k.var.hand_over();
        Some((k.block, k.var))
    }

    fn flush(&self) {
        let all: Vec<Kept> = self.0.lock().drain(..).collect();
        for k in all {
            super::chunk::retire(k.ctx, Some(k.block), k.var);
        }
    }
}

/// Keeps `block` and `var` of a dropped chunk for reuse if the block is small enough;
/// else gives them back.
pub(super) fn keep(ctx: Context, block: Block, var: Var) -> Result<(), (Block, Var)> {
    BIN.keep(ctx, block, var)
}

thread_local! {
    static REUSE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Stops this thread from reusing kept blocks. A custom operator's thread must not: the
/// ops a kept variable waits for may include the custom op itself, which waits for what
/// its thread pushes.
pub fn forbid_reuse_on_this_thread() {
    REUSE.with(|r| r.set(false));
}

/// A kept block of exactly `bytes` bytes on `ctx`, with its variable handed over to a
/// new owner whose next op must write it (see [`Var::hand_over`]). Host threads only,
/// since the ops the variable waits for may be an engine worker's to run.
pub(super) fn take(ctx: Context, bytes: usize) -> Option<(Block, Var)> {
    if bytes == 0
        || bytes > MAX_BLOCK_BYTES
        || engine::is_worker_thread()
        || !REUSE.with(|r| r.get())
    {
        return None;
    }
    BIN.take(ctx, bytes)
}

/// Returns every kept block to its pool through the engine, after the ops queued on it.
pub fn flush() {
    BIN.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{PushSpec, SyncFn};
    use crate::storage;

    fn bin() -> Bin {
        Bin(Mutex::new(VecDeque::new()))
    }

    fn block(bytes: usize) -> Block {
        storage::alloc(Context::cpu(0), bytes).unwrap()
    }

    #[test]
    fn the_newest_block_of_the_size_comes_back_with_its_variable() {
        let bin = bin();
        let cpu = Context::cpu(0);
        let (a, b) = (block(4108), block(4108));
        let (pa, pb) = (a.ptr(), b.ptr());
        let (va, vb) = (Var::new(), Var::new());
        assert!(bin.keep(cpu, a, va.clone()).is_ok());
        assert!(bin.keep(cpu, b, vb.clone()).is_ok());
        assert!(bin.take(cpu, 4104).is_none(), "sizes must match exactly");
        assert!(
            bin.take(Context::gpu(0), 4108).is_none(),
            "devices must match"
        );
        let (got, var) = bin.take(cpu, 4108).unwrap();
        assert!(got.ptr() == pb && var.same(&vb));
        let (got, var) = bin.take(cpu, 4108).unwrap();
        assert!(got.ptr() == pa && var.same(&va));
        assert!(bin.take(cpu, 4108).is_none());
    }

    #[test]
    fn large_and_empty_blocks_are_not_kept() {
        let bin = bin();
        let cpu = Context::cpu(0);
        assert!(bin
            .keep(cpu, block(MAX_BLOCK_BYTES + 1), Var::new())
            .is_err());
        assert!(bin.keep(cpu, block(0), Var::new()).is_err());
        assert!(bin.0.lock().is_empty());
    }

    #[test]
    fn the_oldest_block_is_retired_when_the_bin_is_full() {
        let bin = bin();
        let cpu = Context::cpu(0);
        let (open, closed) = std::sync::mpsc::channel::<()>();
        let busy = Var::new();
        let body: SyncFn = Box::new(move |_| {
            let _ = closed.recv_timeout(std::time::Duration::from_secs(5));
            Ok(())
        });
        engine::get().push_sync(
            body,
            PushSpec::new("busy", cpu, std::slice::from_ref(&busy), &[]),
        );
        assert!(bin.keep(cpu, block(4100), busy.clone()).is_ok());
        for _ in 0..MAX_KEPT {
            assert!(bin.keep(cpu, block(4100), Var::new()).is_ok());
        }
        assert_eq!(bin.0.lock().len(), MAX_KEPT);
        assert!(bin.0.lock().iter().all(|k| !k.var.same(&busy)));
        let _ = open.send(());
        engine::get().wait_for_var(&busy).unwrap();
        bin.flush();
        assert!(bin.0.lock().is_empty());
        engine::get().wait_for_all().unwrap();
    }
}
