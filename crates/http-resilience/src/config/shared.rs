//! The state of each client: made once per name, and shared by every
//! policy, layer and hedge the configuration builds for that name.

use super::{ClientGuards, ClientPolicy};
use crate::policy::RetryBudget;
use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

/// The stateful parts of the clients' policies, by client: the breaker's
/// circuits, overload control's slots and the retry budget's tokens.
///
/// Clones share the map, so that a [`ClientsConfig`](super::ClientsConfig)
/// and its clones give one name one state. The map holds one entry per
/// client section at most, and one for every name without a section (they
/// all get the `[default]` section's policy, and share its state), so it
/// is bounded by the configuration, whatever names are asked for.
#[derive(Clone, Default)]
pub(super) struct States(Arc<Mutex<HashMap<Client, State>>>);

/// Whose state: a client with a section, or any name without one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Client {
    Named(String),
    Default,
}

/// One client's stateful parts.
#[derive(Clone)]
struct State {
    guards: ClientGuards,
    budget: Option<Arc<RetryBudget>>,
}

// ===== impl States =====

impl States {
    /// `policy`, built for `client`, with the state of `client`: the parts
    /// of the first policy built for it, which `policy`'s become when there
    /// is none yet.
    ///
    /// NOTE: a configuration never changes once read, so every policy built
    /// for a name has the same settings, and the first one's parts stand
    /// for all of them.
    pub(super) fn share(&self, client: Client, policy: ClientPolicy) -> ClientPolicy {
        let state = {
            let mut states = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            states
                .entry(client)
                .or_insert_with(|| State::of(&policy))
                .clone()
        };
        state.onto(policy)
    }
}

impl fmt::Debug for States {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let states = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_set().entries(states.keys()).finish()
    }
}

// ===== impl State =====

impl State {
    /// The stateful parts of `policy`.
    fn of(policy: &ClientPolicy) -> Self {
        Self {
            guards: policy.guard().clone(),
            budget: policy.retry().parts().options.budget.clone(),
        }
    }

    /// `policy` with these parts in place of its own.
    fn onto(self, policy: ClientPolicy) -> ClientPolicy {
        let policy = policy.with_guard(self.guards);
        match self.budget {
            Some(budget) => policy.map_retry(|retry| retry.map_options(|o| o.with_budget(budget))),
            None => policy,
        }
    }
}
