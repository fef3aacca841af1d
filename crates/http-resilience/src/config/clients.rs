//! The configuration of every client: its sections, and the policies and
//! layers resolved from them.

#[cfg(feature = "toml")]
use super::error::ErrorKind;
use super::{
    fields::Fields,
    resolve,
    shared::{Client, States},
    validate::client_path,
    written::{Preset, Section},
    ClientGuards, ConfigError,
};
use crate::{
    hedge::HedgePolicy,
    policy::{AnyDecoder, AnyRetryer},
    InvalidSetting, ResilienceLayer, ResiliencePolicy,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A client's policy as the configuration builds it: every part a run-time
/// choice, so that every client has one type.
pub type ClientPolicy = ResiliencePolicy<AnyDecoder, AnyRetryer, ClientGuards>;

/// The resilience policies of named clients: a `[default]` section and one
/// section per client.
///
/// See the [module docs](super) for the format, the resolution and an example.
/// [`Default`] is the empty configuration, which gives every name the
/// `standard` preset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsConfig {
    #[serde(default)]
    default: Section,
    #[serde(default)]
    pub(super) clients: BTreeMap<String, Section>,
    /// The state of each client, made once and shared by clones.
    #[serde(skip)]
    states: States,
}

// ===== impl ClientsConfig =====

impl ClientsConfig {
    /// Reads a configuration from TOML and validates the default section and
    /// every client.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the text is not valid TOML or does not fit the
    /// format (an unknown key, a value of the wrong type), or when a setting
    /// makes no sense (see [Validation](super#validation)).
    #[cfg(feature = "toml")]
    #[cfg_attr(docsrs, doc(cfg(feature = "toml")))]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|err| ConfigError {
            kind: ErrorKind::Toml(err),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the default section, then every client in name order, as
    /// [`policy`](Self::policy) would resolve them.
    ///
    /// [`from_toml_str`](Self::from_toml_str) calls it; a configuration
    /// deserialized another way (from a larger configuration, say) should be
    /// validated once it is loaded.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] found (see [Validation](super#validation)).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.default_fields()?;
        for name in self.names() {
            self.policy(name)?;
        }
        Ok(())
    }

    /// The names of the clients that have a section, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clients.keys().map(String::as_str)
    }

    /// The policy of the client `name`, resolved as the
    /// [module docs](super#resolution) say. A name without a section gets the
    /// policy of the default section.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a setting the policy is made from makes no sense;
    /// never for a configuration that [`validate`](Self::validate) accepted.
    ///
    /// # State
    ///
    /// The policy's breaker, overload control and retry budget are the
    /// client's one state, shared by every policy, layer and hedge built for
    /// `name` from this configuration or its clones (see [One client, one
    /// state](super#one-client-one-state)).
    pub fn policy(&self, name: &str) -> Result<ClientPolicy, ConfigError> {
        Ok(self.build(name)?.0)
    }

    /// The hedging of the client `name`, if its `hedge` table turns it on
    /// (see [Hedging](super#hedging)): judged by the client's retry decoder,
    /// with its retry budget, attempt header and deadline-aware margin.
    ///
    /// Its budget is the client's one, as its [`policy`](Self::policy)'s
    /// (see [One client, one state](super#one-client-one-state)).
    ///
    /// # Errors
    ///
    /// As [`policy`](Self::policy).
    pub fn hedge(&self, name: &str) -> Result<Option<HedgePolicy<AnyDecoder>>, ConfigError> {
        Ok(self.build(name)?.1)
    }

    /// The layer for the client `name`: one call builds the deadline, the
    /// retry, the circuit breaker and the attempt timeout of its
    /// [`policy`](Self::policy), with the semantics of the layers in the
    /// canonical order ([`ResiliencePolicy::layer`]).
    ///
    /// Its breaker, overload control and budget are the client's one state,
    /// shared with every other policy, layer and hedge built for `name` (see
    /// [One client, one state](super#one-client-one-state)).
    ///
    /// # Errors
    ///
    /// As [`policy`](Self::policy), and when the client hedges: its calls
    /// are not retried but hedged, in the stack [Hedging](super#hedging)
    /// shows, which this layer is not.
    pub fn layer(
        &self,
        name: &str,
    ) -> Result<ResilienceLayer<AnyDecoder, AnyRetryer, ClientGuards>, ConfigError> {
        let (policy, hedge) = self.build(name)?;
        if hedge.is_some() {
            let path = self.resolve(name)?.1;
            let problem = "is on: the client hedges instead of retrying; build its stack \
                           with ClientsConfig::hedge and HedgeLayer, as the config docs show";
            return Err(InvalidSetting::new("hedge", problem).within(&path).into());
        }
        Ok(policy.layer())
    }

    /// The policy and the hedging of the client `name`, with its state.
    fn build(&self, name: &str) -> Result<resolve::Built, ConfigError> {
        let (fields, path) = self.resolve(name)?;
        let client = match self.clients.contains_key(name) {
            true => Client::Named(name.to_owned()),
            false => Client::Default,
        };
        let share = |policy| self.states.share(client, policy);
        Ok(fields.build_with_hedge(&path, share)?)
    }

    /// The fields of the client `name`, resolved, and its section's path.
    fn resolve(&self, name: &str) -> Result<(Fields, String), ConfigError> {
        let Some(section) = self.clients.get(name) else {
            return Ok((self.default_fields()?, "default".to_owned()));
        };
        let path = client_path(name);
        if name == "default" {
            return Err(InvalidSetting::new(
                path,
                "is not allowed: the defaults of every client go in [default]",
            )
            .into());
        }
        let base = match &section.preset {
            Some(preset) => preset.get("preset", &path)?.fields(),
            None => {
                let mut fields = self.default_fields()?;
                fields.origins = fields.origins.seen_from_a_client();
                fields
            }
        };
        let fields = section.apply(base, &path)?;
        Ok((fields, path))
    }

    /// The default section resolved over its base, and checked on its own.
    fn default_fields(&self) -> Result<Fields, InvalidSetting> {
        let base = match &self.default.preset {
            Some(preset) => preset.get("preset", "default")?,
            None => Preset::Standard,
        };
        let fields = self.default.apply(base.fields(), "default")?;
        fields.build("default")?;
        Ok(fields)
    }
}
