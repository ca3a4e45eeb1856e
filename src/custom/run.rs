//! Running a custom op's user code: on a thread of the custom-op pool, never on an engine
//! worker, over arrays that alias the op's memory under engine variables of their own.
//! A last engine op, queued behind everything the user code pushed on those arrays,
//! completes the op with the first error any of it raised.

use crate::context::{Context, DeviceType};
use crate::engine::{self, EngineKind, OnComplete, PushSpec, StreamHandle, Var};
use crate::error::{Error, Result};
use crate::ndarray::{NDArray, TBlob};
use crate::op::{AsyncCall, OpReq};
use crate::profiler;
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};

/// What the user code of one run gets.
pub(super) struct Aliases {
    pub ctx: Context,
    pub is_train: bool,
    pub req: Vec<OpReq>,
    pub inputs: Vec<NDArray>,
    pub outputs: Vec<NDArray>,
}

/// Runs `work` for `call`, then completes the op through `done` once everything `work`
/// pushed has finished. Under the NaiveEngine, or when the op is started from a
/// custom-op thread (a custom op inside another's code), it runs on the calling thread.
/// `scope` names the code to the profiler (`MySigmoid`, `_backward_MySigmoid`).
pub(super) fn start(
    scope: Arc<str>,
    call: AsyncCall,
    done: OnComplete,
    work: impl FnOnce(Aliases) -> Result<()> + Send + 'static,
) {
    let task = move || run(scope, call, done, work);
    if engine::get().kind() == EngineKind::Naive || ON_POOL.with(Cell::get) {
        task();
    } else {
        pool().submit(Box::new(task));
    }
}

fn run(
    scope: Arc<str>,
    call: AsyncCall,
    done: OnComplete,
    work: impl FnOnce(Aliases) -> Result<()>,
) {
    let AsyncCall {
        is_train,
        ctx,
        stream,
        inputs,
        outputs,
        req,
    } = call;
    let aliases = alias_all(ctx, &inputs).and_then(|i| Ok((i, alias_all(ctx, &outputs)?)));
    let (ins, outs) = match aliases {
        Ok(a) => a,
        Err(e) => return done.done(Err(e)),
    };
    // Held until the last op is queued: dropping an alias deletes its variable.
    let keep: Vec<NDArray> = ins.iter().chain(&outs).cloned().collect();
    let vars: Vec<Var> = keep.iter().map(|a| a.var().clone()).collect();
    let arrays = Aliases {
        ctx,
        is_train,
        req,
        inputs: ins,
        outputs: outs,
    };
    let outer = profiler::set_custom_scope(Some(scope.clone()));
    let began = profiler::now_us();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(arrays)))
        .unwrap_or_else(|_| {
            Err(Error::Runtime(
                "Custom: the operator's code panicked".into(),
            ))
        });
    profiler::set_custom_scope(outer);
    if profiler::ops_active(false) {
        let name = format!("{scope}::pure_python");
        profiler::record_span(
            profiler::CUSTOM_OPERATOR,
            &name,
            began,
            profiler::now_us(),
            false,
        );
    }
    let finisher = Finisher {
        done: Some(done),
        error: result.err(),
        vars: vars.clone(),
        stream,
    };
    engine::get().push_sync(
        Box::new(move |_| {
            let mut f = finisher;
            f.complete();
            Ok(())
        }),
        PushSpec::new("CustomOperator", ctx, &[], &vars),
    );
    drop(keep);
}

/// Arrays over `blobs`' memory with engine variables of their own; on a GPU they start
/// with the events of the variables they stand for.
fn alias_all(ctx: Context, blobs: &[(TBlob, Var)]) -> Result<Vec<NDArray>> {
    blobs
        .iter()
        .map(|(b, real)| {
            // SAFETY: the engine keeps the custom op's arrays, and nothing else writes
            // them, until the op completes; it completes only after every op pushed on
            // these aliases has finished (`Finisher`).
            let a = unsafe { NDArray::foreign(ctx, b.ptr(), &b.shape, b.dtype, Box::new(|| {})) }?;
            if ctx.dev_type == DeviceType::Gpu {
                crate::cuda::sync::share_events(a.var(), real);
            }
            Ok(a)
        })
        .collect()
}

/// Completes a custom op from the engine op queued behind its user code's work (or, if
/// the engine skips that op because the work failed, when it is dropped).
struct Finisher {
    done: Option<OnComplete>,
    error: Option<Error>,
    vars: Vec<Var>,
    stream: Option<StreamHandle>,
}

impl Finisher {
    fn complete(&mut self) {
        let Some(done) = self.done.take() else {
            return;
        };
        // Taken, so that each failure is raised once: by the custom op's outputs.
        let mut result = match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        };
        for v in &self.vars {
            if let Some(e) = v.take_error() {
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        // The op's own stream records its completion: it must follow the user's GPU work.
        if let (Ok(()), Some(s)) = (&result, self.stream) {
            for v in &self.vars {
                if let Err(e) = crate::cuda::sync::stream_wait(s, v) {
                    result = Err(e);
                    break;
                }
            }
        }
        done.done(result);
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.complete();
    }
}

type Task = Box<dyn FnOnce() + Send>;

thread_local! {
    static ON_POOL: Cell<bool> = const { Cell::new(false) };
}

/// The threads custom ops run on: one more is started whenever none is idle, up to
/// `MXNET_CUSTOM_OP_NUM_THREADS` (16 by default), so that user code waiting on another
/// custom op's result does not wait behind it.
struct Pool {
    tx: Mutex<Sender<Task>>,
    rx: &'static Mutex<Receiver<Task>>,
    idle: &'static AtomicUsize,
    threads: AtomicUsize,
    max: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = channel();
        let max = engine::env_var("RSMX_CUSTOM_OP_NUM_THREADS", "MXNET_CUSTOM_OP_NUM_THREADS")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(16);
        Pool {
            tx: Mutex::new(tx),
            rx: Box::leak(Box::new(Mutex::new(rx))),
            idle: Box::leak(Box::new(AtomicUsize::new(0))),
            threads: AtomicUsize::new(0),
            max,
        }
    })
}

impl Pool {
    fn submit(&self, task: Task) {
        if self.idle.load(Ordering::Acquire) == 0 && self.threads.load(Ordering::Acquire) < self.max
        {
            let n = self.threads.fetch_add(1, Ordering::AcqRel);
            let (rx, idle) = (self.rx, self.idle);
            let spawned = std::thread::Builder::new()
                .name(format!("rsmx-custom-{n}"))
                .spawn(move || worker(rx, idle));
            if spawned.is_err() {
                self.threads.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // The receiver lives for the whole process, so sending cannot fail.
        let _ = self.tx.lock().send(task);
    }
}

fn worker(rx: &Mutex<Receiver<Task>>, idle: &AtomicUsize) {
    ON_POOL.with(|c| c.set(true));
    crate::ndarray::recycle::forbid_reuse_on_this_thread();
    loop {
        idle.fetch_add(1, Ordering::AcqRel);
        let task = rx.lock().recv();
        idle.fetch_sub(1, Ordering::AcqRel);
        match task {
            Ok(t) => t(),
            Err(_) => return,
        }
    }
}
