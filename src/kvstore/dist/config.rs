//! A node's settings, read from the environment variables MXNet's launchers set
//! (`DMLC_ROLE`, `DMLC_PS_ROOT_URI`, ...) and rsmx's own (`RSMX_DIST_*`).

use super::layout::DEFAULT_BIGARRAY_BOUND;
use super::meta::Role;
use crate::error::{Error, Result};
use std::path::PathBuf;
use std::time::Duration;

/// What a node needs to know to join a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    pub role: Role,
    pub num_servers: i32,
    pub num_workers: i32,
    /// `DMLC_PS_ROOT_URI` and `DMLC_PS_ROOT_PORT`: where the scheduler listens.
    pub scheduler_host: String,
    pub scheduler_port: u16,
    /// `DMLC_NODE_HOST`: the address other nodes reach this one at; empty: the address
    /// this machine uses to reach the scheduler.
    pub node_host: String,
    /// `PORT`: the port to listen on (ps-lite lets it override the one it picks).
    pub port: Option<u16>,
    /// `DMLC_PS_WATER_MARK`: the send high-water mark of each connection.
    pub send_hwm: Option<i32>,
    /// `PS_VERBOSE`: 1 logs the node's life, 2 also every message.
    pub verbose: i32,
    /// `PS_RESEND` (non-zero): acknowledge every message, as ps-lite's resender expects
    /// (rsmx itself never resends: its peers' losses are noticed by the connections).
    pub resend: bool,
    /// `RSMX_DIST_HEARTBEAT_MS` (default 1000): libzmq heartbeat interval; a peer silent
    /// for five intervals is gone. `0` turns heartbeats off.
    pub heartbeat_ms: i32,
    /// `RSMX_DIST_CONNECT_TIMEOUT` in seconds (default 120): how long a node waits to be
    /// registered with the scheduler.
    pub connect_timeout: Duration,
    /// `MXNET_KVSTORE_BIGARRAY_BOUND` (default 1,000,000): arrays of at least this many
    /// elements are split over every server.
    pub bigarray_bound: usize,
    /// `RSMX_DIST_PORT_FILE`: where a scheduler started with `DMLC_PS_ROOT_PORT=0` writes
    /// the port the system gave it (how `rsmx.launch` avoids guessing a free port).
    pub port_file: Option<PathBuf>,
    /// `RSMX_DIST_IPC` (default 1; Linux): an rsmx node also listens on a Unix socket,
    /// and rsmx peers on the same host connect there instead of over loopback TCP.
    pub ipc: bool,
}

impl NodeConfig {
    /// The settings from the process's environment.
    pub fn from_env() -> Result<NodeConfig> {
        NodeConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings from `lookup(name)`, which gives a variable's value if it is set.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<NodeConfig> {
        let required = |name: &str| {
            lookup(name).ok_or_else(|| {
                Error::Value(format!(
                    "KVStore dist: {name} is not set (a distributed job needs DMLC_ROLE, \
                     DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER and DMLC_NUM_WORKER)"
                ))
            })
        };
        let number = |name: &str, text: String| {
            text.trim()
                .parse::<i64>()
                .map_err(|_| Error::Value(format!("KVStore dist: {name}={text:?} is not a number")))
        };
        let in_range = |name: &str, text: String, low: i64, high: i64| {
            let v = number(name, text.clone())?;
            if (low..=high).contains(&v) {
                Ok(v)
            } else {
                Err(Error::Value(format!(
                    "KVStore dist: {name}={text:?} is out of range ({low} to {high})"
                )))
            }
        };
        let optional = |name: &str, low: i64, high: i64| {
            lookup(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| in_range(name, v, low, high))
                .transpose()
        };
        let role = match required("DMLC_ROLE")?.trim() {
            "scheduler" => Role::Scheduler,
            "server" => Role::Server,
            "worker" => Role::Worker,
            other => {
                return Err(Error::Value(format!(
                    "KVStore dist: DMLC_ROLE={other:?}: expected scheduler, server or worker"
                )))
            }
        };
        let count = |name: &str| in_range(name, required(name)?, 0, 1 << 20).map(|v| v as i32);
        let num_servers = count("DMLC_NUM_SERVER")?;
        let num_workers = count("DMLC_NUM_WORKER")?;
        let port_max = i64::from(u16::MAX);
        // Only a scheduler may take port 0: the system picks one, which it then reports.
        let lowest_port = i64::from(role != Role::Scheduler);
        let scheduler_port = in_range(
            "DMLC_PS_ROOT_PORT",
            required("DMLC_PS_ROOT_PORT")?,
            lowest_port,
            port_max,
        )? as u16;
        Ok(NodeConfig {
            role,
            num_servers,
            num_workers,
            scheduler_host: required("DMLC_PS_ROOT_URI")?.trim().to_string(),
            scheduler_port,
            node_host: lookup("DMLC_NODE_HOST")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            port: optional("PORT", 1, port_max)?.map(|p| p as u16),
            send_hwm: optional("DMLC_PS_WATER_MARK", 0, i64::from(i32::MAX))?.map(|v| v as i32),
            verbose: optional("PS_VERBOSE", 0, 3)?.unwrap_or(0) as i32,
            resend: optional("PS_RESEND", i64::MIN, i64::MAX)?.unwrap_or(0) != 0,
            heartbeat_ms: optional("RSMX_DIST_HEARTBEAT_MS", 0, 1 << 30)?.unwrap_or(1000) as i32,
            connect_timeout: Duration::from_secs(
                optional("RSMX_DIST_CONNECT_TIMEOUT", 1, 1 << 30)?.unwrap_or(120) as u64,
            ),
            bigarray_bound: optional("MXNET_KVSTORE_BIGARRAY_BOUND", 1, i64::MAX)?
                .map_or(DEFAULT_BIGARRAY_BOUND, |v| v as usize),
            port_file: lookup("RSMX_DIST_PORT_FILE")
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from),
            ipc: cfg!(target_os = "linux") && optional("RSMX_DIST_IPC", 0, 1)?.unwrap_or(1) != 0,
        })
    }

    /// `host:port` of the scheduler, as errors name it.
    pub fn scheduler_address(&self) -> String {
        format!("{}:{}", self.scheduler_host, self.scheduler_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<NodeConfig> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::from_lookup(|name| vars.get(name).cloned())
    }

    const BASE: [(&str, &str); 5] = [
        ("DMLC_ROLE", "worker"),
        ("DMLC_NUM_SERVER", "2"),
        ("DMLC_NUM_WORKER", "3"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", "9091"),
    ];

    #[test]
    fn the_launcher_variables_make_a_node_config() {
        let c = config(&BASE).unwrap();
        assert_eq!(c.role, Role::Worker);
        assert_eq!((c.num_servers, c.num_workers), (2, 3));
        assert_eq!(c.scheduler_address(), "127.0.0.1:9091");
        assert_eq!(
            (c.port, c.send_hwm, c.verbose, c.resend),
            (None, None, 0, false)
        );
        assert_eq!(c.heartbeat_ms, 1000);
        assert_eq!(c.connect_timeout, Duration::from_secs(120));
        assert_eq!(c.bigarray_bound, 1_000_000);

        let mut more = BASE.to_vec();
        more.extend([
            ("PORT", "4567"),
            ("DMLC_NODE_HOST", "10.0.0.7"),
            ("DMLC_PS_WATER_MARK", "100"),
            ("PS_VERBOSE", "2"),
            ("RSMX_DIST_HEARTBEAT_MS", "0"),
            ("RSMX_DIST_CONNECT_TIMEOUT", "5"),
            ("PS_RESEND", "1"),
        ]);
        let c = config(&more).unwrap();
        assert_eq!(c.port, Some(4567));
        assert_eq!(c.node_host, "10.0.0.7");
        assert_eq!((c.send_hwm, c.verbose, c.heartbeat_ms), (Some(100), 2, 0));
        assert_eq!(c.connect_timeout, Duration::from_secs(5));
        assert!(c.resend);
    }

    #[test]
    fn a_missing_or_bad_variable_is_named() {
        for (drop, want) in [
            ("DMLC_ROLE", "DMLC_ROLE is not set"),
            ("DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_PORT is not set"),
            ("DMLC_NUM_WORKER", "DMLC_NUM_WORKER is not set"),
        ] {
            let vars: Vec<_> = BASE.iter().copied().filter(|(k, _)| *k != drop).collect();
            let e = config(&vars).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        for (name, value, want) in [
            (
                "DMLC_ROLE",
                "boss",
                "DMLC_ROLE=\"boss\": expected scheduler, server or worker",
            ),
            ("DMLC_PS_ROOT_PORT", "70000", "out of range"),
            ("DMLC_NUM_SERVER", "two", "is not a number"),
            ("PORT", "0", "PORT=\"0\" is out of range"),
            (
                "DMLC_PS_ROOT_PORT",
                "0",
                "DMLC_PS_ROOT_PORT=\"0\" is out of range (1 to",
            ),
        ] {
            let mut vars = BASE.to_vec();
            vars.retain(|(k, _)| *k != name);
            vars.push((name, value));
            let e = config(&vars).unwrap_err().to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
    }

    #[test]
    fn only_a_scheduler_may_ask_for_any_port_and_report_it() {
        let mut vars = BASE.to_vec();
        vars.retain(|(k, _)| !["DMLC_ROLE", "DMLC_PS_ROOT_PORT"].contains(k));
        vars.extend([
            ("DMLC_ROLE", "scheduler"),
            ("DMLC_PS_ROOT_PORT", "0"),
            ("RSMX_DIST_PORT_FILE", "/tmp/port"),
        ]);
        let c = config(&vars).unwrap();
        assert_eq!(c.scheduler_port, 0);
        assert_eq!(c.port_file, Some(PathBuf::from("/tmp/port")));
    }
}
