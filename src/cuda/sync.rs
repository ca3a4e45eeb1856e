//! Ordering GPU work by CUDA events, MXNet's `SyncObject` scheme: each engine variable
//! remembers the event of its last GPU writer and of its readers since, one per stream.
//! A GPU op waits (on the device) for the events of other streams, enqueues its work,
//! records one event and completes in the engine at once; only host reads wait.

use super::runtime::{Device, Event, Runtime};
use crate::engine::{StreamHandle, Var};
use crate::error::Result;
use smallvec::SmallVec;

/// The events of one variable's last GPU writer and its readers since.
#[derive(Default)]
pub struct GpuSync {
    writer: Option<Event>,
    /// At most one per stream: a later event on a stream supersedes an earlier one.
    readers: SmallVec<[Event; 2]>,
}

impl GpuSync {
    /// Every event a write must wait for: the last writer and the readers since.
    fn all(&self) -> impl Iterator<Item = &Event> {
        self.writer.iter().chain(self.readers.iter())
    }
}

/// Makes `stream` wait for what an op reading `reads` and writing `writes` depends on.
pub fn on_start(stream: StreamHandle, reads: &[Var], writes: &[Var]) -> Result<()> {
    for v in reads {
        if let Some(sync) = v.gpu_sync() {
            if let Some(w) = &sync.lock().writer {
                if w.stream() != stream {
                    w.wait_on(stream)?;
                }
            }
        }
    }
    for v in writes {
        if let Some(sync) = v.gpu_sync() {
            for e in sync.lock().all() {
                if e.stream() != stream {
                    e.wait_on(stream)?;
                }
            }
        }
    }
    Ok(())
}

/// Records the op's event on `stream` and hands it to its variables.
pub fn on_complete(
    rt: &'static Runtime,
    dev: &'static Device,
    stream: StreamHandle,
    reads: &[Var],
    writes: &[Var],
) -> Result<()> {
    let event = dev.record(rt.driver, stream)?;
    for v in reads {
        let mut sync = v.gpu_sync_or_init().lock();
        sync.readers.retain(|e| e.stream() != stream);
        sync.readers.push(event.clone());
    }
    for v in writes {
        let mut sync = v.gpu_sync_or_init().lock();
        sync.readers.clear();
        sync.writer = Some(event.clone());
    }
    Ok(())
}

/// Blocks the host until the GPU work on `var` is done: its last write, and for
/// `for_write` also the reads since.
pub fn host_wait(var: &Var, for_write: bool) -> Result<()> {
    let Some(sync) = var.gpu_sync() else {
        return Ok(());
    };
    let events: SmallVec<[Event; 3]> = {
        let s = sync.lock();
        if for_write {
            s.all().cloned().collect()
        } else {
            s.writer.iter().cloned().collect()
        }
    };
    for e in events {
        e.synchronize()?;
    }
    Ok(())
}

/// Gives a new variable the fence of the memory it guards: its first write waits for
/// those earlier users as it would for readers.
pub fn adopt_fence(var: &Var, fence: Vec<Event>) {
    if !fence.is_empty() {
        var.gpu_sync_or_init().lock().readers.extend(fence);
    }
}

/// Gives `alias`, a new variable over the memory `real` guards, `real`'s events: GPU ops
/// on the alias then wait for the work on that memory as ops on `real` would.
pub fn share_events(alias: &Var, real: &Var) {
    let Some(sync) = real.gpu_sync() else {
        return;
    };
    let (writer, readers) = {
        let s = sync.lock();
        (s.writer.clone(), s.readers.clone())
    };
    let mut a = alias.gpu_sync_or_init().lock();
    a.writer = writer;
    a.readers = readers;
}

/// Makes `stream` wait for all GPU work on `var`: its last write and the reads since.
pub fn stream_wait(stream: StreamHandle, var: &Var) -> Result<()> {
    for e in fence_of(var) {
        if e.stream() != stream {
            e.wait_on(stream)?;
        }
    }
    Ok(())
}

/// The events after which memory guarded by `var` is free of GPU work.
pub fn fence_of(var: &Var) -> Vec<Event> {
    var.gpu_sync()
        .map(|s| s.lock().all().cloned().collect())
        .unwrap_or_default()
}

/// A GPU op between its start and its completion in the engine: where it enqueues.
pub struct GpuOp {
    rt: &'static Runtime,
    dev: &'static Device,
    pub stream: StreamHandle,
}

impl GpuOp {
    /// Readies the calling thread for an op on `ctx`: the device's context current, the
    /// thread's stream waiting for the events the op depends on.
    pub fn start(ctx: crate::context::Context, reads: &[Var], writes: &[Var]) -> Result<GpuOp> {
        let (rt, dev) = super::runtime::for_context(ctx)?;
        dev.make_current(rt.driver)?;
        let stream = dev.stream(rt.driver)?;
        on_start(stream, reads, writes)?;
        Ok(GpuOp { rt, dev, stream })
    }

    /// Records the op's event on its variables; with `synchronize` (the NaiveEngine),
    /// also waits for the device to finish it, so a fault is blamed on this op.
    pub fn finish(&self, reads: &[Var], writes: &[Var], synchronize: bool) -> Result<()> {
        on_complete(self.rt, self.dev, self.stream, reads, writes)?;
        if synchronize {
            super::runtime::count_host_sync();
            // SAFETY: the stream is this thread's live stream on the device.
            unsafe { crate::cu!(self.rt.driver, stream_synchronize(self.stream.as_raw())) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
