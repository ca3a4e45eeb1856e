//! Engine variables: the unit of dependency tracking (MXNet's ThreadedVar: a queue of the
//! ops waiting on the variable) and the slot where op errors are kept.

use super::errors::ErrorRef;
use super::opr::OprRef;
use crate::error::Error;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::cuda::sync::GpuSync;

/// A handle to an engine variable. Clones refer to the same variable.
#[derive(Clone, Default)]
pub struct Var(pub(crate) Arc<VarInner>);

/// The source of variables' identities.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// What a variable's memory holds, as far as the engine can tell: the variable and how
/// many writes on it have completed. Two equal stamps, read while no write on the
/// variable runs, saw the same bytes (see [`Var::content_stamp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentStamp {
    var: u64,
    writes: u64,
}

/// The shared state of a variable.
pub(crate) struct VarInner {
    /// Who may run now, and who waits.
    state: Mutex<VarState>,
    /// True while `error` holds a cell (lets the hot path skip the lock).
    has_error: AtomicBool,
    /// The error of the last failed op that wrote this variable, until it is raised
    /// (here or anywhere else that shares the cell).
    error: Mutex<Option<ErrorRef>>,
    /// CUDA events of the GPU work on the variable; set by its first GPU op.
    gpu: OnceLock<Box<Mutex<GpuSync>>>,
    /// This variable's identity, never reused by another.
    uid: u64,
    /// Writes completed on the variable, engine ops and direct ones.
    writes: AtomicU64,
    /// The memory may change without a write on the variable (shared with another
    /// library): it has no content stamp.
    untracked: AtomicBool,
}

impl Default for VarInner {
    fn default() -> Self {
        VarInner {
            state: Mutex::default(),
            has_error: AtomicBool::new(false),
            error: Mutex::default(),
            gpu: OnceLock::new(),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            writes: AtomicU64::new(0),
            untracked: AtomicBool::new(false),
        }
    }
}

/// The dependency state of a variable.
///
/// Invariants: `running_reads > 0` and `writing` are never both set; when `queue` is not
/// empty, the op at its front is a write, or a read queued behind the running write.
#[derive(Default)]
struct VarState {
    /// Reads that were let through and have not completed.
    running_reads: usize,
    /// A write was let through and has not completed.
    writing: bool,
    /// Ops waiting for this variable, in push order; `true` marks a write.
    queue: VecDeque<(OprRef, bool)>,
    /// The variable was handed to a new owner (recycled memory) whose first write is
    /// still to come.
    handed_over: bool,
    /// The first writes of the new owners, in push order, while queued: when one may
    /// run, the errors its predecessors' writes left are no longer the variable's.
    first_writes: VecDeque<usize>,
}

/// Ops that a completion let through on some variables; each still has to count down.
pub(crate) type Granted = SmallVec<[OprRef; 4]>;

impl Var {
    /// A new variable with no pending ops.
    pub fn new() -> Var {
        Var::default()
    }

    /// A stable identity for the variable, for dedup and ordering.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// True if both handles name the same variable.
    pub fn same(&self, other: &Var) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The CUDA events of GPU work on the variable, if any GPU op touched it.
    pub fn gpu_sync(&self) -> Option<&Mutex<GpuSync>> {
        self.0.gpu.get().map(|b| &**b)
    }

    /// As [`Var::gpu_sync`], made empty on first use.
    pub fn gpu_sync_or_init(&self) -> &Mutex<GpuSync> {
        self.0.gpu.get_or_init(Default::default)
    }

    /// The stored error, if any, without clearing it.
    pub fn peek_error(&self) -> Option<Error> {
        self.error_cell().and_then(|c| c.peek())
    }

    /// True when no op pushed on this variable is waiting or running.
    ///
    /// This is the fast path for freeing memory: when the owner of the variable is about
    /// to drop it and `is_idle()` is true, nothing queued can still touch the memory it
    /// guards, so it may be returned to the pool at once instead of through
    /// `Engine::delete_variable`. The answer is only stable if no other thread can push
    /// ops on the variable concurrently (true for a variable whose last user is the
    /// caller). Under the NaiveEngine every variable is always idle.
    pub fn is_idle(&self) -> bool {
        let s = self.0.state.lock();
        !s.writing && s.running_reads == 0 && s.queue.is_empty()
    }

    /// The stamp of what the memory holds now, or `None` when it may change without a
    /// write on the variable. Meaningful while no write on the variable runs, as inside
    /// an op that reads it.
    pub fn content_stamp(&self) -> Option<ContentStamp> {
        if self.0.untracked.load(Ordering::Acquire) {
            return None;
        }
        Some(ContentStamp {
            var: self.0.uid,
            writes: self.0.writes.load(Ordering::Acquire),
        })
    }

    /// Counts a write made outside the engine's ops (a copy from host memory on the
    /// calling thread), after it.
    pub fn note_write(&self) {
        self.0.writes.fetch_add(1, Ordering::AcqRel);
    }

    /// The memory is shared with code that may write it without the engine: no content
    /// stamp from now on.
    pub fn mark_untracked(&self) {
        self.0.untracked.store(true, Ordering::Release);
    }

    /// Hands the variable, with ops of its old owner still queued, to a new owner whose
    /// next op writes it: readers pushed before see the old owner's errors, the new
    /// owner's first write and everything after it do not.
    pub fn hand_over(&self) {
        self.0.state.lock().handed_over = true;
    }

    /// Forgets the stored error on this variable alone (other holders of the error and
    /// the engine's list keep it).
    fn forget_error(&self) {
        let mut slot = self.0.error.lock();
        self.0.has_error.store(false, Ordering::Release);
        *slot = None;
    }

    /// A write is let through: the new owner's first write leaves the old errors behind.
    fn grant_write(&self, s: &mut VarState, op: &OprRef) {
        s.writing = true;
        if s.first_writes.front() == Some(&(Arc::as_ptr(op) as usize)) {
            s.first_writes.pop_front();
            self.forget_error();
        }
    }

    /// True while some pushed write on this variable has not completed.
    pub(crate) fn has_pending_write(&self) -> bool {
        let s = self.0.state.lock();
        // A non-empty queue always has a write at its front or running ahead of it.
        s.writing || !s.queue.is_empty()
    }

    /// The error cell on this variable, if it still holds an error.
    pub(crate) fn error_cell(&self) -> Option<ErrorRef> {
        if !self.0.has_error.load(Ordering::Acquire) {
            return None;
        }
        self.0.error.lock().as_ref().filter(|c| c.is_set()).cloned()
    }

    pub(crate) fn set_error(&self, cell: &ErrorRef) {
        let mut slot = self.0.error.lock();
        *slot = Some(cell.clone());
        self.0.has_error.store(true, Ordering::Release);
    }

    /// Raises the error on this variable: returns it and clears it everywhere.
    pub(crate) fn take_error(&self) -> Option<Error> {
        if !self.0.has_error.load(Ordering::Acquire) {
            return None;
        }
        let cell = {
            let mut slot = self.0.error.lock();
            self.0.has_error.store(false, Ordering::Release);
            slot.take()
        };
        cell.and_then(|c| c.take())
    }

    /// Gives a read that is let through the error its earlier writes left, so that a
    /// later wait that clears the error does not change what the read sees.
    fn hand_error_to(&self, op: &OprRef) {
        if let Some(cell) = self.error_cell() {
            op.inherit_error(cell);
        }
    }

    /// Registers a read by `op`; true if it may read at once.
    pub(crate) fn append_read(&self, op: &OprRef) -> bool {
        let mut s = self.0.state.lock();
        if !s.writing && s.queue.is_empty() {
            s.running_reads += 1;
            self.hand_error_to(op);
            true
        } else {
            s.queue.push_back((op.clone(), false));
            false
        }
    }

    /// Registers a write by `op`; true if it may write at once.
    pub(crate) fn append_write(&self, op: &OprRef) -> bool {
        let mut s = self.0.state.lock();
        if std::mem::take(&mut s.handed_over) {
            s.first_writes.push_back(Arc::as_ptr(op) as usize);
        }
        if !s.writing && s.running_reads == 0 && s.queue.is_empty() {
            self.grant_write(&mut s, op);
            true
        } else {
            s.queue.push_back((op.clone(), true));
            false
        }
    }

    /// After a burst, gives back a drained queue's memory.
    fn trim(s: &mut VarState) {
        if s.queue.is_empty() && s.queue.capacity() > 256 {
            s.queue = VecDeque::new();
        }
    }

    /// A read finished; the next write may go when it was the last running read.
    pub(crate) fn complete_read(&self, granted: &mut Granted) {
        let mut s = self.0.state.lock();
        debug_assert!(s.running_reads > 0 && !s.writing);
        s.running_reads -= 1;
        if s.running_reads == 0 && matches!(s.queue.front(), Some((_, true))) {
            let (op, _) = s.queue.pop_front().expect("front checked");
            self.grant_write(&mut s, &op);
            granted.push(op);
            Self::trim(&mut s);
        }
    }

    /// A write finished; the reads queued behind it go together, or else the next write.
    pub(crate) fn complete_write(&self, granted: &mut Granted) {
        self.note_write();
        let mut s = self.0.state.lock();
        debug_assert!(s.writing && s.running_reads == 0);
        s.writing = false;
        while matches!(s.queue.front(), Some((_, false))) {
            let (op, _) = s.queue.pop_front().expect("front checked");
            s.running_reads += 1;
            self.hand_error_to(&op);
            granted.push(op);
        }
        if s.running_reads == 0 && matches!(s.queue.front(), Some((_, true))) {
            let (op, _) = s.queue.pop_front().expect("front checked");
            self.grant_write(&mut s, &op);
            granted.push(op);
        }
        Self::trim(&mut s);
    }
}

impl std::fmt::Debug for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Var({:#x})", self.id())
    }
}
