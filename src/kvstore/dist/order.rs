//! The order in which a worker's requests for one key leave: the order the program made
//! them in, whatever order the engine runs their ops in. A request takes a [`Turn`] when
//! it is made and sends through it when its op runs; a send waits for every earlier turn.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A request's send, waiting for its turn.
type Sending = Box<dyn FnOnce() + Send>;

/// One key's queue of turns.
#[derive(Default)]
pub struct WireOrder {
    /// The next turn to hand out. Its lock is held while the request's op is queued on the
    /// engine, so that turns and engine order agree.
    issued: Mutex<u64>,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    /// The turn whose send goes next.
    next: u64,
    /// Sends that came before their turn.
    parked: BTreeMap<u64, Sending>,
    /// A thread is running sends: others only park theirs, so that sends keep their order
    /// without any lock held while one runs.
    draining: bool,
}

/// A request's place in its key's order. Dropped unused (its op never ran), it lets the
/// later turns through.
pub struct Turn {
    order: Arc<WireOrder>,
    ticket: u64,
    used: bool,
    /// Run when the turn is dropped unused, before the later turns go.
    unused: Option<Sending>,
}

impl WireOrder {
    /// Hands `queue_op` the next turn, and runs it before any later turn is handed out.
    pub fn issue<R>(self: &Arc<Self>, queue_op: impl FnOnce(Turn) -> R) -> R {
        let mut issued = self.issued.lock();
        let turn = Turn {
            order: self.clone(),
            ticket: *issued,
            used: false,
            unused: None,
        };
        *issued += 1;
        queue_op(turn)
    }

    fn arrive(&self, ticket: u64, send: Sending) {
        let mut q = self.queue.lock();
        q.parked.insert(ticket, send);
        if q.draining {
            return;
        }
        q.draining = true;
        // A send that panics fails its own op (the engine catches it); the later sends
        // still go, then the panic goes on.
        let mut panicked = None;
        loop {
            let next = q.next;
            let Some(send) = q.parked.remove(&next) else {
                q.draining = false;
                break;
            };
            q.next += 1;
            drop(q);
            if let Err(p) = catch_unwind(AssertUnwindSafe(send)) {
                panicked.get_or_insert(p);
            }
            q = self.queue.lock();
        }
        drop(q);
        if let Some(p) = panicked {
            resume_unwind(p);
        }
    }
}

impl Turn {
    /// Has `f` run if the turn is dropped unused (its op never ran), before the later
    /// turns go.
    pub fn if_unused(mut self, f: impl FnOnce() + Send + 'static) -> Turn {
        self.unused = Some(Box::new(f));
        self
    }

    /// Runs `send` once every earlier turn of the key has sent (here, or on the thread
    /// whose send lets it through).
    pub fn send(mut self, send: impl FnOnce() + Send + 'static) {
        self.used = true;
        self.order.arrive(self.ticket, Box::new(send));
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.used {
            if let Some(f) = self.unused.take() {
                f();
            }
            self.order.arrive(self.ticket, Box::new(|| {}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_keep_the_order_of_their_turns() {
        let order = Arc::new(WireOrder::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let turns: Vec<Turn> = (0..4).map(|_| order.issue(|t| t)).collect();
        let mut turns: Vec<Option<Turn>> = turns.into_iter().map(Some).collect();
        for i in [2, 3, 0] {
            let sent = sent.clone();
            turns[i].take().unwrap().send(move || sent.lock().push(i));
        }
        assert_eq!(*sent.lock(), [0], "1 has not come yet: 2 and 3 wait");
        let s = sent.clone();
        turns[1].take().unwrap().send(move || s.lock().push(1));
        assert_eq!(*sent.lock(), [0, 1, 2, 3]);
    }

    #[test]
    fn a_dropped_turn_lets_the_later_ones_through() {
        let order = Arc::new(WireOrder::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let first = order.issue(|t| t);
        let second = order.issue(|t| t);
        let s = sent.clone();
        second.send(move || s.lock().push(2));
        assert!(sent.lock().is_empty());
        let s = sent.clone();
        drop(first.if_unused(move || s.lock().push(1)));
        assert_eq!(*sent.lock(), [1, 2], "its hook first, then the later turns");
    }

    #[test]
    fn a_send_that_panics_lets_the_later_ones_through() {
        let order = Arc::new(WireOrder::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let first = order.issue(|t| t);
        let second = order.issue(|t| t);
        let s = sent.clone();
        second.send(move || s.lock().push(2));
        let r = catch_unwind(AssertUnwindSafe(|| first.send(|| panic!("a broken send"))));
        assert!(r.is_err(), "the panic goes on to the op that sent");
        assert_eq!(*sent.lock(), [2]);
        let s = sent.clone();
        order.issue(|t| t).send(move || s.lock().push(3));
        assert_eq!(*sent.lock(), [2, 3]);
    }

    #[test]
    fn turns_sent_from_many_threads_go_in_order() {
        let order = Arc::new(WireOrder::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let turns: Vec<Turn> = (0..200).map(|_| order.issue(|t| t)).collect();
        std::thread::scope(|s| {
            let mut all: Vec<(usize, Turn)> = turns.into_iter().enumerate().collect();
            all.reverse();
            let halves = [all.split_off(100), all];
            for half in halves {
                let sent = sent.clone();
                s.spawn(move || {
                    for (i, t) in half {
                        let sent = sent.clone();
                        t.send(move || sent.lock().push(i));
                    }
                });
            }
        });
        assert_eq!(*sent.lock(), (0..200).collect::<Vec<_>>());
    }
}
