//! Op blocks: one pushed op with its variables, its wait counter and its body, and what
//! happens when it becomes ready, runs and completes.

use super::errors::{ErrorCell, ErrorRef};
use super::pool::Pool;
use super::shared::EngineShared;
use super::var::Granted;
use super::{AsyncFn, FnProperty, OnComplete, PushSpec, RunContext, SyncFn, Var, BULK};
use crate::context::{Context, DeviceType};
use crate::cuda::sync::GpuOp;
use crate::error::{Error, Result};
use crate::profiler;
use crossbeam_utils::Backoff;
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A shared reference to an op block; var queues and worker deques hold these.
pub(crate) type OprRef = Arc<OprBlock>;

/// Variables of one op, deduplicated.
pub(crate) type VarList = SmallVec<[Var; 4]>;

/// What an op does when it runs.
pub(crate) enum Body {
    /// A synchronous body: completes when it returns.
    Sync(SyncFn),
    /// An asynchronous body: completes when its `OnComplete` is called.
    Async(AsyncFn),
    /// An internal read that wakes a thread in `wait_for_var`; runs inline when ready.
    Signal(Arc<WaitSlot>),
}

/// Where an op runs once its variables let it through.
pub(crate) enum Runner {
    /// On a worker of this pool; the pool's engine counts the op.
    Pool(Arc<Pool>),
    /// At once, on the thread that makes it ready (the NaiveEngine); the engine counts it.
    Inline(Arc<EngineShared>),
    /// At once and uncounted: the engine's own wait signals.
    Internal,
}

impl Runner {
    /// The engine that counts the op and keeps its errors.
    fn engine(&self) -> Option<&EngineShared> {
        match self {
            Runner::Pool(pool) => Some(&pool.engine),
            Runner::Inline(engine) => Some(engine),
            Runner::Internal => None,
        }
    }
}

/// A one-shot flag a thread can block on.
#[derive(Default)]
pub(crate) struct WaitSlot {
    /// Set with `done`, readable without the lock while spinning.
    set: AtomicBool,
    done: Mutex<bool>,
    cv: Condvar,
}

impl WaitSlot {
    pub(crate) fn notify(&self) {
        self.set.store(true, Ordering::Release);
        *self.done.lock() = true;
        self.cv.notify_all();
    }

    pub(crate) fn wait(&self) {
        // Small ops finish within microseconds: spinning first saves the sleeping
        // thread's wake-up, which costs more than the op itself.
        let backoff = Backoff::new();
        while !backoff.is_completed() {
            if self.set.load(Ordering::Acquire) {
                return;
            }
            backoff.snooze();
        }
        let mut done = self.done.lock();
        while !*done {
            self.cv.wait(&mut done);
        }
    }
}

/// `async_state`: the body is running or its completion is still out.
const RUNNING: u8 = 0;
/// `async_state`: the completion was dropped while the body panicked on this thread.
const DROPPED_IN_PANIC: u8 = 1;
/// `async_state`: the op has completed.
const FINISHED: u8 = 2;

thread_local! {
    /// The op whose async body runs on this thread (its address), to tell a completion
    /// dropped by that body's panic from one dropped elsewhere.
    static RUNNING_ASYNC: Cell<usize> = const { Cell::new(0) };
    /// How many async ops run inline, one inside another, on this thread.
    static INLINE_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// How deep async ops run inline before the next one goes to a worker.
const MAX_INLINE_DEPTH: u32 = 4;

/// One pushed op.
pub(crate) struct OprBlock {
    /// Variables still to let this op through, plus one held by the pusher until it
    /// has queued the op on all of them. The one that brings it to zero dispatches it.
    wait: AtomicUsize,
    body: Mutex<Option<Body>>,
    /// Goes to the high-priority queue of its pool.
    pub(crate) high_priority: bool,
    /// Its place in that queue: higher first.
    pub(crate) priority: i32,
    ctx: Context,
    const_vars: VarList,
    mutable_vars: VarList,
    prop: FnProperty,
    name: &'static str,
    /// A bound executor's step (the profiler records symbolic and imperative ops apart).
    symbolic: bool,
    runner: Runner,
    async_state: AtomicU8,
    /// The first error found on a read variable when it let this op through.
    inherited: OnceLock<ErrorRef>,
    /// When an async body started, while the profiler records ops (0: not recorded).
    profiled_start: AtomicU64,
    /// The custom operator whose code pushed this op, while the profiler records ops.
    custom_scope: Option<Arc<str>>,
}

/// Removes duplicates within each list and drops reads of variables the op also writes.
/// (The order of the variables does not matter to the engine.)
pub(crate) fn dedup_vars(const_vars: &[Var], mutable_vars: &[Var]) -> (VarList, VarList) {
    if const_vars.len() + mutable_vars.len() > 16 {
        let mut muts: VarList = mutable_vars.iter().cloned().collect();
        muts.sort_unstable_by_key(Var::id);
        muts.dedup_by_key(|v| v.id());
        let mut consts: VarList = const_vars
            .iter()
            .filter(|v| muts.binary_search_by_key(&v.id(), Var::id).is_err())
            .cloned()
            .collect();
        consts.sort_unstable_by_key(Var::id);
        consts.dedup_by_key(|v| v.id());
        return (consts, muts);
    }
    let mut muts = VarList::with_capacity(mutable_vars.len());
    for v in mutable_vars {
        if !muts.iter().any(|m| m.same(v)) {
            muts.push(v.clone());
        }
    }
    let mut consts = VarList::with_capacity(const_vars.len());
    for v in const_vars {
        if !muts.iter().any(|m| m.same(v)) && !consts.iter().any(|c| c.same(v)) {
            consts.push(v.clone());
        }
    }
    (consts, muts)
}

/// `Error::Runtime("<op name>: <panic message>")` for a caught panic.
pub(crate) fn panic_error(name: &str, payload: Box<dyn Any + Send>) -> Error {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    };
    Error::Runtime(format!("{name}: {msg}"))
}

impl OprBlock {
    /// Queues a new op on its variables; dispatches it if nothing holds it back.
    pub(crate) fn push(runner: Runner, body: Body, spec: PushSpec<'_>) {
        let PushSpec {
            ctx,
            const_vars,
            mutable_vars,
            prop,
            priority,
            name,
            symbolic,
        } = spec;
        let (const_vars, mutable_vars) = dedup_vars(const_vars, mutable_vars);
        if let Some(engine) = runner.engine() {
            engine.op_pushed();
        }
        let hold = const_vars.len() + mutable_vars.len() + 1;
        let op = Arc::new(OprBlock {
            wait: AtomicUsize::new(hold),
            body: Mutex::new(Some(body)),
            high_priority: priority > 0 || prop == FnProperty::CpuPrioritized,
            priority,
            ctx,
            const_vars,
            mutable_vars,
            prop,
            name,
            symbolic,
            runner,
            async_state: AtomicU8::new(RUNNING),
            inherited: OnceLock::new(),
            profiled_start: AtomicU64::new(0),
            custom_scope: if profiler::ops_active(symbolic) {
                profiler::custom_scope()
            } else {
                None
            },
        });
        let mut let_through = 1;
        for v in &op.const_vars {
            let_through += usize::from(v.append_read(&op));
        }
        for v in &op.mutable_vars {
            let_through += usize::from(v.append_write(&op));
        }
        if op.wait.fetch_sub(let_through, Ordering::AcqRel) == let_through {
            op.dispatch(false);
        }
    }

    /// Counts down one variable that let this op through.
    fn let_through(self: OprRef, continuation: bool) {
        if self.wait.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.dispatch(continuation);
        }
    }

    /// Sends a ready op to its pool, or runs it here. `continuation` is true when a worker
    /// made it ready by finishing an op it just ran: a deletion then runs at once on that
    /// worker, since handing memory back costs less than waking another thread for it.
    fn dispatch(self: OprRef, continuation: bool) {
        if continuation && self.prop == FnProperty::DeleteVar {
            return self.execute();
        }
        if self.prop == FnProperty::Async && self.ctx.dev_type == DeviceType::Cpu {
            // Its body only starts work that completes elsewhere: running it here saves
            // waking a worker, as MXNet runs its async ops on the thread that pushes them.
            // A chain of ops completing inside their bodies recurses, so only so deep.
            let depth = INLINE_DEPTH.with(Cell::get);
            if depth < MAX_INLINE_DEPTH {
                INLINE_DEPTH.with(|d| d.set(depth + 1));
                self.execute();
                INLINE_DEPTH.with(|d| d.set(depth));
                return;
            }
        }
        match &self.runner {
            Runner::Pool(pool) => pool.clone().submit(self, continuation),
            Runner::Inline(_) | Runner::Internal => self.execute(),
        }
    }

    /// Runs a ready op; called by a worker (or inline for internal ops).
    pub(crate) fn execute(self: OprRef) {
        let body = self.body.lock().take();
        let Some(body) = body else {
            debug_assert!(false, "op {} executed twice", self.name);
            return;
        };
        if !matches!(body, Body::Signal(_)) && self.prop != FnProperty::DeleteVar {
            if let Some(cell) = self.inherited.get().cloned() {
                drop(body);
                self.finish(Some(cell), true);
                return;
            }
        }
        let mut rctx = RunContext::new(self.ctx);
        let gpu = if self.runs_on_gpu(&body) {
            match GpuOp::start(self.ctx, &self.const_vars, &self.mutable_vars) {
                Ok(g) => {
                    rctx.stream = Some(g.stream);
                    Some(g)
                }
                Err(e) => {
                    drop(body);
                    let e = e.in_op(self.name);
                    self.finish(Some(ErrorCell::new(e)), true);
                    return;
                }
            }
        } else {
            None
        };
        match body {
            Body::Sync(f) => {
                let start = profiler::ops_active(self.symbolic).then(profiler::now_us);
                let mut r = catch_unwind(AssertUnwindSafe(move || f(rctx)))
                    .unwrap_or_else(|p| Err(panic_error(self.name, p)));
                if let Some(start) = start {
                    // A bulk records each of its steps itself.
                    if self.name != BULK {
                        self.record_profile(start);
                    }
                }
                if let (Ok(()), Some(g)) = (&r, &gpu) {
                    r = self.finish_gpu(g);
                }
                self.finish(r.err().map(ErrorCell::new), true);
            }
            Body::Async(f) => {
                if profiler::ops_active(self.symbolic) {
                    self.profiled_start
                        .store(profiler::now_us(), Ordering::Relaxed);
                }
                let done = match gpu {
                    // The event goes on the stream when the op reports its completion, so
                    // that it covers everything the op enqueued.
                    Some(g) => {
                        let me = self.clone();
                        OnComplete::new(move |r| {
                            let r = r.and_then(|()| me.finish_gpu(&g));
                            me.complete_async(r);
                        })
                    }
                    None => OnComplete::for_opr(self.clone()),
                };
                let me = Arc::as_ptr(&self) as usize;
                let outer = RUNNING_ASYNC.with(|c| c.replace(me));
                let r = catch_unwind(AssertUnwindSafe(move || f(rctx, done)));
                RUNNING_ASYNC.with(|c| c.set(outer));
                if let Err(p) = r {
                    let e = panic_error(self.name, p);
                    let state = self.async_state.compare_exchange(
                        DROPPED_IN_PANIC,
                        RUNNING,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    match state {
                        Ok(_) => self.finish(Some(ErrorCell::new(e)), false),
                        // Completed before the panic, or the completion lives elsewhere
                        // and will still be called: the panic is reported all the same.
                        Err(_) => self.engine_error(&ErrorCell::new(e)),
                    }
                }
            }
            Body::Signal(slot) => {
                // Leave the variable first, so that the waiter finds it as we found it.
                self.finish(None, false);
                slot.notify();
            }
        }
    }

    /// True when the op is GPU work, whose stream the engine prepares and whose
    /// completion it records as an event.
    fn runs_on_gpu(&self, body: &Body) -> bool {
        self.ctx.dev_type == DeviceType::Gpu
            && self.prop != FnProperty::DeleteVar
            && !matches!(body, Body::Signal(_))
    }

    fn finish_gpu(&self, g: &GpuOp) -> Result<()> {
        let naive = matches!(self.runner, Runner::Inline(_));
        g.finish(&self.const_vars, &self.mutable_vars, naive)
            .map_err(|e| e.in_op(self.name))
    }

    /// Records the op, run from `start` to now, with the profiler.
    fn record_profile(&self, start: u64) {
        let scope = self.custom_scope.as_deref();
        profiler::record_op_in(scope, self.name, self.ctx, start, self.symbolic);
    }

    /// Called by a read variable that lets this op through carrying an error.
    pub(crate) fn inherit_error(&self, cell: ErrorRef) {
        let _ = self.inherited.set(cell);
    }

    /// An async op reports its outcome.
    pub(crate) fn complete_async(self: OprRef, result: Result<()>) {
        let start = self.profiled_start.load(Ordering::Relaxed);
        if start != 0 {
            self.record_profile(start);
        }
        self.finish(result.err().map(ErrorCell::new), false);
    }

    /// An async op's completion was dropped without being called.
    pub(crate) fn completion_dropped(self: OprRef) {
        let me = Arc::as_ptr(&self) as usize;
        let own_body = RUNNING_ASYNC.with(|c| c.get()) == me;
        if std::thread::panicking() && own_body {
            // The body is unwinding here; `execute` completes it with the panic message.
            self.async_state.store(DROPPED_IN_PANIC, Ordering::Release);
        } else {
            let e = Error::Runtime(format!(
                "{}: the op finished without reporting completion",
                self.name
            ));
            self.finish(Some(ErrorCell::new(e)), false);
        }
    }

    fn engine_error(&self, cell: &ErrorRef) {
        if let Some(engine) = self.runner.engine() {
            engine.record_error(cell);
        }
    }

    /// Stores the op's error (its own or one it inherited) on the variables it writes and
    /// in the engine's list, lets the next ops through on every variable, and counts the
    /// op done.
    fn finish(self: OprRef, error: Option<ErrorRef>, continuation: bool) {
        self.async_state.store(FINISHED, Ordering::Release);
        if let Some(cell) = &error {
            for v in &self.mutable_vars {
                v.set_error(cell);
            }
            self.engine_error(cell);
        }
        let mut granted = Granted::new();
        for v in &self.const_vars {
            v.complete_read(&mut granted);
        }
        for v in &self.mutable_vars {
            v.complete_write(&mut granted);
        }
        for op in granted {
            op.let_through(continuation);
        }
        if let Some(engine) = self.runner.engine() {
            engine.op_done();
        }
    }
}
