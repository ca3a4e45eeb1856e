//! The per-thread autograd switches: recording, and training mode (MXNet keeps both
//! thread-local).

use std::cell::Cell;

thread_local! {
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    static TRAINING: Cell<bool> = const { Cell::new(false) };
}

/// True while ops run on this thread are recorded.
pub fn is_recording() -> bool {
    RECORDING.with(Cell::get)
}

/// True while ops run on this thread run in training mode (dropout, batch statistics).
pub fn is_training() -> bool {
    TRAINING.with(Cell::get)
}

/// Sets recording on this thread; returns the previous setting.
pub fn set_recording(on: bool) -> bool {
    RECORDING.with(|c| c.replace(on))
}

/// Sets training mode on this thread; returns the previous setting.
pub fn set_training(on: bool) -> bool {
    TRAINING.with(|c| c.replace(on))
}
