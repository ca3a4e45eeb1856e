//! What a kernel may keep across the runs of one executor node: something derived from
//! its inputs alone (a convolution's transformed weights), reused while the content
//! stamps of those inputs stay the same.

use crate::engine::ContentStamp;
use crate::ndarray::NDArray;
use parking_lot::{Mutex, MutexGuard};
use std::any::Any;

/// A node's slot for its kernel's kept value.
#[derive(Default)]
pub struct KernelMemo(Mutex<Option<Box<dyn Any + Send>>>);

/// The slot, held by one run of the kernel.
pub type MemoSlot<'a> = MutexGuard<'a, Option<Box<dyn Any + Send>>>;

impl KernelMemo {
    /// The slot, unless another run holds it.
    pub fn try_slot(&self) -> Option<MemoSlot<'_>> {
        self.0.try_lock()
    }

    /// Drops what the slot keeps.
    pub fn clear(&self) {
        *self.0.lock() = None;
    }

    /// True if the slot keeps something.
    pub fn is_set(&self) -> bool {
        self.0.lock().is_some()
    }
}

/// A node's memo and input arrays, lent to one run of its kernel.
#[derive(Clone, Copy)]
pub struct NodeMemo<'a> {
    pub memo: &'a KernelMemo,
    pub inputs: &'a [NDArray],
}

impl NodeMemo<'_> {
    /// The content stamp of input `i` now, if it has one.
    pub fn input_stamp(&self, i: usize) -> Option<ContentStamp> {
        self.inputs.get(i)?.var().content_stamp()
    }
}

/// The value `slot` keeps for `key`, made by `make` unless it is there: a kept value of
/// another key or type is replaced.
pub fn kept<K: PartialEq + Send + 'static, V: Send + 'static>(
    slot: &mut Option<Box<dyn Any + Send>>,
    key: K,
    make: impl FnOnce() -> V,
) -> &V {
    let fresh = !slot
        .as_ref()
        .and_then(|b| b.downcast_ref::<(K, V)>())
        .is_some_and(|(k, _)| *k == key);
    if fresh {
        *slot = Some(Box::new((key, make())));
    }
    let (_, v) = slot
        .as_ref()
        .and_then(|b| b.downcast_ref::<(K, V)>())
        .expect("just kept");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_made_once_per_key() {
        let memo = KernelMemo::default();
        let mut made = 0;
        let mut get = |key: u32| {
            let mut slot = memo.try_slot().unwrap();
            *kept(&mut slot, key, || {
                made += 1;
                key * 10
            })
        };
        assert_eq!(get(1), 10);
        assert_eq!(get(1), 10);
        assert_eq!(get(2), 20);
        assert_eq!(get(1), 10);
        assert_eq!(made, 3);
        assert!(memo.is_set());
        memo.clear();
        assert!(!memo.is_set());
    }

    #[test]
    fn a_held_slot_is_not_lent_twice() {
        let memo = KernelMemo::default();
        let held = memo.try_slot().unwrap();
        assert!(memo.try_slot().is_none());
        drop(held);
        assert!(memo.try_slot().is_some());
    }
}
