//! The link to Redis: one connection manager (redis-rs reconnects it), the
//! lease script and the pause script.
//!
//! Both scripts read the time from Redis itself (`TIME`), so that every
//! process of the fleet counts on one clock, and write keys that expire
//! once the quota is idle.

use redis::{aio::ConnectionManager, aio::ConnectionManagerConfig, Client, Script};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Leases up to `ARGV[3]` tokens of a GCRA kept in microseconds of Redis's
/// clock: `KEYS[1]` the theoretical arrival time, `KEYS[2]` the end of a
/// pause. `ARGV[1]` is the interval, `ARGV[2]` the burst's tolerance,
/// `ARGV[4]` how far ahead of now a token may be. Token `j` of the lease is
/// usable from `max(base, m + j * interval - tau)`; the reply is
/// `{now, m, base, count}`.
///
/// NOTE: Lua numbers are doubles, exact to 2^53 µs (285 years);
/// `string.format('%.0f')` writes them whole, where `tostring` would write
/// `1.7e+15`.
const LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local horizon = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local pause = tonumber(redis.call('GET', KEYS[2]) or '0')
local base = math.max(now, pause)
local m = math.max(tat, base)
local fit = math.floor((now + horizon + tau - m) / interval) + 1
local count = math.max(0, math.min(want, fit))
if count > 0 then
  local next = m + count * interval
  local ttl = math.ceil((next - now + tau) / 1000) + 1000
  redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', ttl)
end
return {now, m, base, count}
";

/// Pauses the quota for `ARGV[1]` microseconds from Redis's now, unless a
/// longer pause holds: `KEYS[1]` is the end of the pause.
const PAUSE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wait = tonumber(ARGV[1])
local pause = tonumber(redis.call('GET', KEYS[1]) or '0')
if now + wait > pause then
  redis.call('SET', KEYS[1], string.format('%.0f', now + wait), 'PX', math.ceil(wait / 1000) + 1)
end
return 0
";

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);

/// How long a command may take before the manager reports it failed.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// A lease as Redis answered it, in microseconds of Redis's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reply {
    pub(super) now: u64,
    pub(super) m: u64,
    pub(super) base: u64,
    pub(super) count: u32,
}

/// What a lease asks for, in microseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    pub(super) interval: u64,
    pub(super) tau: u64,
    pub(super) want: u32,
    pub(super) horizon: u64,
}

/// The link to one Redis.
pub(super) struct Link {
    client: Client,
    manager: OnceCell<ConnectionManager>,
    lease: Script,
    pause: Script,
}

// ===== impl Link =====

impl Link {
    pub(super) fn new(client: Client) -> Self {
        Self {
            client,
            manager: OnceCell::new(),
            lease: Script::new(LEASE),
            pause: Script::new(PAUSE),
        }
    }

    /// The connection manager, connected on first use (and again by
    /// redis-rs after a failure).
    async fn manager(&self) -> redis::RedisResult<ConnectionManager> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(RESPONSE_TIMEOUT)
            .set_number_of_retries(1)
            .set_max_delay(100);
        let manager = self
            .manager
            .get_or_try_init(|| ConnectionManager::new_with_config(self.client.clone(), config))
            .await?;
        Ok(manager.clone())
    }

    /// Connects, and loads the scripts, so that the first lease is one
    /// round trip.
    pub(super) async fn connect(&self) -> redis::RedisResult<()> {
        let mut manager = self.manager().await?;
        self.lease.load_async(&mut manager).await?;
        self.pause.load_async(&mut manager).await?;
        Ok(())
    }

    /// Leases tokens of the quota kept under `name`: one round trip.
    pub(super) async fn lease(&self, name: &str, ask: Ask) -> redis::RedisResult<Reply> {
        let mut manager = self.manager().await?;
        let (now, m, base, count): (u64, u64, u64, u32) = self
            .lease
            .key(format!("{name}:tat"))
            .key(format!("{name}:pause"))
            .arg(ask.interval)
            .arg(ask.tau)
            .arg(ask.want)
            .arg(ask.horizon)
            .invoke_async(&mut manager)
            .await?;
        Ok(Reply {
            now,
            m,
            base,
            count,
        })
    }

    /// Pauses the quota kept under `name` for `wait`: one round trip.
    pub(super) async fn pause(&self, name: &str, wait: Duration) -> redis::RedisResult<()> {
        let mut manager = self.manager().await?;
        let micros = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.pause
            .key(format!("{name}:pause"))
            .arg(micros)
            .invoke_async::<i64>(&mut manager)
            .await
            .map(drop)
    }
}
