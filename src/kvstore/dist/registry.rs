//! The scheduler's bookkeeping, apart from any socket: registrations until every server
//! and worker has come, then ids in ps-lite's order, so that a cluster ranks its nodes
//! the same whichever side's scheduler runs it; and the barrier count of each group.

use super::layout::{group_members, server_id, worker_id, ALL};
use super::meta::{Node, Role, EMPTY};
use crate::error::{Error, Result};
use std::cmp::Ordering;

/// Registrations of servers and workers, until all of them have come.
pub struct Registry {
    num_servers: i32,
    num_workers: i32,
    pending: Vec<Node>,
}

impl Registry {
    /// Waits for `num_servers` servers and `num_workers` workers.
    pub fn new(num_servers: i32, num_workers: i32) -> Registry {
        Registry {
            num_servers,
            num_workers,
            pending: Vec::new(),
        }
    }

    /// Takes one node's registration. When the last one arrives, returns every node with
    /// its id, followed by `scheduler`: the list each node is sent.
    pub fn add(&mut self, node: Node, scheduler: &Node) -> Result<Option<Vec<Node>>> {
        let expected = |role| match role {
            Role::Server => Ok(self.num_servers),
            Role::Worker => Ok(self.num_workers),
            Role::Scheduler => Err(Error::Value(format!(
                "a second scheduler at {}:{} tried to register",
                node.hostname, node.port
            ))),
        };
        let limit = expected(node.role)?;
        let same_role = self.pending.iter().filter(|n| n.role == node.role).count();
        if same_role as i32 >= limit {
            return Err(Error::Value(format!(
                "one {:?} too many registered from {}:{} (the job has {limit})",
                node.role, node.hostname, node.port
            )));
        }
        if self
            .pending
            .iter()
            .any(|n| n.hostname == node.hostname && n.port == node.port)
        {
            return Err(Error::Value(format!(
                "{}:{} registered twice",
                node.hostname, node.port
            )));
        }
        self.pending.push(node);
        if self.pending.len() < (self.num_servers + self.num_workers) as usize {
            return Ok(None);
        }
        let mut nodes = std::mem::take(&mut self.pending);
        nodes.sort_by(ps_lite_order);
        let (mut servers, mut workers) = (0, 0);
        for n in &mut nodes {
            n.id = match n.role {
                Role::Server => server_id(post_inc(&mut servers)),
                _ => worker_id(post_inc(&mut workers)),
            };
        }
        nodes.push(scheduler.clone());
        Ok(Some(nodes))
    }
}

fn post_inc(n: &mut i32) -> i32 {
    *n += 1;
    *n - 1
}

/// ps-lite's order of registrations: host names descending, then ports ascending (its
/// comparator is `(a.hostname.compare(b.hostname) | (a.port < b.port)) > 0`).
fn ps_lite_order(a: &Node, b: &Node) -> Ordering {
    b.hostname
        .as_bytes()
        .cmp(a.hostname.as_bytes())
        .then(a.port.cmp(&b.port))
}

/// Barrier requests counted per group; a group's barrier is released when every member
/// has asked.
pub struct Barriers {
    num_servers: i32,
    num_workers: i32,
    counts: [usize; ALL as usize + 1],
}

impl Barriers {
    pub fn new(num_servers: i32, num_workers: i32) -> Barriers {
        Barriers {
            num_servers,
            num_workers,
            counts: [0; ALL as usize + 1],
        }
    }

    /// Counts a request for `group`; when it completes the group, returns the ids to
    /// answer, in ps-lite's order, and starts the count again.
    pub fn request(&mut self, group: i32) -> Result<Option<Vec<i32>>> {
        if !(1..=ALL).contains(&group) {
            return Err(Error::Value(format!(
                "barrier for group {group}: groups are 1 to {ALL}"
            )));
        }
        let members = group_members(group, self.num_servers, self.num_workers);
        let count = &mut self.counts[group as usize];
        *count += 1;
        if *count < members.len() {
            return Ok(None);
        }
        *count = 0;
        Ok(Some(members))
    }
}

/// A node as it registers: its role and address, no id yet.
pub fn unregistered(role: Role, hostname: &str, port: i32, customer_id: i32) -> Node {
    Node {
        role,
        id: EMPTY,
        hostname: hostname.to_string(),
        port,
        is_recovery: false,
        customer_id,
        rsmx_ipc: None,
    }
}
