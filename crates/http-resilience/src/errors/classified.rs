//! How the errors of the crate's features reach [`FailureKind`] without
//! being named here: each registers a probe, and [`FailureKind::of`] reads
//! the probes for every link of the chain that the core's own checks leave
//! undecided.
//!
//! NOTE: the vocabulary points down. `errors/` names no feature's error type;
//! a feature implements [`Classified`] for its error (or writes a probe of
//! its own, for an error of another crate that it brings, as the reqwest glue
//! does) and registers it with [`classify`] (or [`register`]) in every
//! constructor, behind a `static` [`Once`] of its own, so that a rejection
//! in a tight loop pays one atomic load. A boxed error stays the feature's
//! type (`downcast_ref` finds it) and its `source()` chain is untouched: the
//! registry is consulted beside the chain, never threaded into it. (A list
//! of the features' types kept at the crate root would need no registry, but
//! this module would read the list, and so depend on every feature through
//! it.)
//!
//! The consequence: an error type is classified once any value of it has
//! been made, which is always true for a value one holds when every
//! constructor registers (the fields of the crate's errors are private, so
//! `new` is the only way in, and a clone comes from a value made by it). An
//! error of another crate is classified once the feature that brings it has
//! registered it (the reqwest glue does so before it can return one, and
//! when one is looked at through [`AsError`](super::AsError)).
//!
//! The registry is append-only and bounded: [`CAPACITY`] slots, filled in
//! order, each written once. A reader stops at the first empty slot; a slot
//! is full before the next one is written, and a type's registration ends
//! before its first value exists, so a reader that holds a value of a
//! registered type sees its probe.

use super::FailureKind;
use std::{
    any::TypeId,
    error::Error,
    sync::{Once, OnceLock},
};

/// An error type of a feature that [`FailureKind::of`] reads as one kind,
/// wherever it is in the chain.
pub(crate) trait Classified: Error + Send + Sync + 'static {
    /// The kind of every error of this type.
    const KIND: FailureKind;
}

/// What one link of an error's chain says: the terms in which the core reads
/// its own errors, hyper's and `std::io`'s, and a probe reads a feature's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// The link decides the kind, whatever lies beneath.
    Kind(FailureKind),
    /// The link is a transport's error; the errors beneath still decide when
    /// they say more, and the signs of every link decide when none does.
    Transport(Signs),
}

/// What a transport's error says of where the call failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Signs {
    /// Connecting failed: the request was never sent.
    pub(crate) connecting: bool,
    /// The connection closed before the message was complete.
    pub(crate) closed: bool,
    /// The request was canceled before it was written.
    pub(crate) unsent: bool,
}

/// A probe: it reads an error of its type, and says nothing of any other.
pub(crate) type Probe = fn(&(dyn Error + 'static)) -> Option<Reading>;

/// How many error types can register. Only the crate's features register
/// (the trait and the functions are crate-private), fewer than this.
const CAPACITY: usize = 12;

/// A registered probe and the type it reads.
#[derive(Clone, Copy)]
struct Entry {
    type_id: TypeId,
    probe: Probe,
}

static PROBES: [OnceLock<Entry>; CAPACITY] = [const { OnceLock::new() }; CAPACITY];

/// Registers `E` as [`Classified`], once for `once`: a `static` of the
/// caller's own, one per error type.
pub(crate) fn classify<E: Classified>(once: &'static Once) {
    register::<E>(once, kind_of::<E>);
}

/// Registers `probe` as the reader of the errors of type `E`, once for
/// `once`. A type registered again keeps its first probe.
pub(crate) fn register<E: Error + 'static>(once: &'static Once, probe: Probe) {
    once.call_once(|| {
        insert(Entry {
            type_id: TypeId::of::<E>(),
            probe,
        })
    });
}

/// What the registered probes read in `err`, if any reads it.
pub(crate) fn read(err: &(dyn Error + 'static)) -> Option<Reading> {
    PROBES
        .iter()
        .map_while(OnceLock::get)
        .find_map(|entry| (entry.probe)(err))
}

/// The probe of a [`Classified`] type.
fn kind_of<E: Classified>(err: &(dyn Error + 'static)) -> Option<Reading> {
    err.is::<E>().then_some(Reading::Kind(E::KIND))
}

/// Writes `entry` into the first free slot, unless its type holds one.
fn insert(entry: Entry) {
    for slot in &PROBES {
        // NOTE: `get_or_init` waits for a slot another thread is writing, so
        // the slots fill in order and none is skipped.
        if slot.get_or_init(|| entry).type_id == entry.type_id {
            return;
        }
    }
    debug_assert!(false, "more error types register than the registry holds");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BoxError;
    use std::{fmt, io};

    /// An error of a feature of its own, classified by its constructor.
    #[derive(Debug)]
    struct Refused;

    impl Refused {
        fn new() -> Self {
            static CLASSIFIED: Once = Once::new();
            classify::<Self>(&CLASSIFIED);
            Self
        }
    }

    impl fmt::Display for Refused {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("refused")
        }
    }

    impl Error for Refused {}

    impl Classified for Refused {
        const KIND: FailureKind = FailureKind::CircuitOpen;
    }

    /// An error of a type that never registers.
    #[derive(Debug)]
    struct Unknown;

    impl fmt::Display for Unknown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("unknown")
        }
    }

    impl Error for Unknown {}

    #[test]
    fn a_registered_error_is_read_below_wrappers() {
        let err: BoxError = io::Error::other(Refused::new()).into();
        assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);
        assert!(err
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|inner| inner.is::<Refused>()));
        assert_eq!(
            read(&Refused::new()),
            Some(Reading::Kind(FailureKind::CircuitOpen))
        );
    }

    #[test]
    fn a_type_that_never_registered_reads_as_nothing() {
        assert_eq!(read(&Unknown), None);
        let err: BoxError = Unknown.into();
        assert_eq!(FailureKind::of(&*err), FailureKind::Other);
    }

    #[test]
    fn a_type_registers_once_whatever_the_onces() {
        static FIRST: Once = Once::new();
        static SECOND: Once = Once::new();
        classify::<Refused>(&FIRST);
        classify::<Refused>(&SECOND);
        let refused = TypeId::of::<Refused>();
        let slots = PROBES
            .iter()
            .map_while(OnceLock::get)
            .filter(|entry| entry.type_id == refused)
            .count();
        assert_eq!(slots, 1);
    }
}
