//! A flag one side sets once and another waits for: the waiting side's waker
//! is kept, and woken when the flag is set.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, PoisonError,
    },
    task::Waker,
};

/// Set once; the waker kept by the last look before it was set is woken.
#[derive(Debug, Default)]
pub(crate) struct Flag {
    set: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Flag {
    /// Whether the flag is set.
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Whether the flag is set; `waker` is woken when it is, if it was not
    /// yet.
    pub(crate) fn poll_set(&self, waker: &Waker) -> bool {
        // NOTE: the waker is stored before the flag is read, and the flag is
        // set before the waker is taken, so a flag set between the two is
        // seen one way or the other.
        let mut kept = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        match &*kept {
            Some(waker_kept) if waker_kept.will_wake(waker) => {}
            _ => *kept = Some(waker.clone()),
        }
        drop(kept);
        self.is_set()
    }

    /// Sets the flag, and wakes the waker kept, the first time only.
    pub(crate) fn set(&self) {
        if self.set.swap(true, Ordering::AcqRel) {
            return;
        }
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Flag;
    use crate::test_support::counting_waker;

    #[test]
    fn the_waker_kept_is_woken_once_when_the_flag_is_set() {
        let flag = Flag::default();
        let (count, waker) = counting_waker();
        assert!(!flag.poll_set(&waker));
        assert!(!flag.poll_set(&waker), "looked at again, not set");
        flag.set();
        flag.set();
        assert_eq!(count.wakes(), 1);
        assert!(flag.is_set() && flag.poll_set(&waker));
    }
}
