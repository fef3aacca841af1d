//! Redis for the fleet tests: Debian's `redis-server`, started by the test
//! on a free loopback port with its own settings (no persistence, its files
//! in a temporary directory), and stopped by its process handle.
//!
//! Without `redis-server` the tests skip with a message, unless
//! [`REDIS_REQUIRED`] is set (as `.ci/run` sets it, after installing the
//! package), when its absence fails them.
// NOTE: shared with the `quota` bench, which uses other parts of it.
#![allow(dead_code, unreachable_pub)]

use std::{
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};
use tokio::time::Instant;

/// Set, a missing `redis-server` fails the tests instead of skipping them.
pub const REDIS_REQUIRED: &str = "HTTP_RESILIENCE_REQUIRE_REDIS";

/// How long Redis may take to start listening.
const STARTUP: Duration = Duration::from_secs(5);

/// A `redis-server` child process.
pub struct Redis {
    pub addr: SocketAddr,
    dir: PathBuf,
    binary: PathBuf,
    child: Option<Child>,
}

impl Redis {
    /// Redis, started; `None` (with a message) when it is not installed and
    /// not required.
    pub async fn start_or_skip() -> Option<Self> {
        let Some(binary) = find_redis() else {
            assert!(
                std::env::var_os(REDIS_REQUIRED).is_none(),
                "redis-server is not installed: these tests need it. Install Debian's \
                 `redis-server` (`apt-get install -y redis-server`); .ci/run installs it"
            );
            eprintln!(
                "SKIPPED: redis-server is not installed (`apt-get install -y redis-server`); \
                 set {REDIS_REQUIRED}=1 to make its absence a failure, as CI does"
            );
            return None;
        };
        let addr = http_resilience_mock::vacant_addr().expect("a vacant loopback port");
        let dir = std::env::temp_dir().join(format!(
            "http-resilience-redis-{}-{}",
            std::process::id(),
            addr.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = Self {
            addr,
            dir,
            binary,
            child: None,
        };
        redis.restart().await;
        Some(redis)
    }

    /// The URL redis-rs connects to.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("running")
    }

    /// Stops the server (by its process handle).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub async fn restart(&mut self) {
        self.stop();
        let child = Command::new(&self.binary)
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.addr.port().to_string(),
            ])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", self.binary.display()));
        self.child = Some(child);
        self.wait_until_listening().await;
    }

    async fn wait_until_listening(&mut self) {
        let started = Instant::now();
        while TcpStream::connect(self.addr).is_err() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("redis-server exited ({status}): {}", self.log());
            }
            assert!(
                started.elapsed() < STARTUP,
                "redis-server did not listen in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `redis-server` binary: on `PATH`, or where Debian puts it.
fn find_redis() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}
