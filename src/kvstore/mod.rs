//! The KVStore: values kept per key; pushes from several devices are summed and applied
//! by an updater, pulls broadcast the stored value to every device.
//!
//! Layered as MXNet's: [`Store`] is the interface, [`LocalStore`] the store on one
//! machine, which moves data with a [`Comm`] chosen by its type ([`CommCpu`] on the host,
//! [`CommDevice`] on the devices pushing), and [`create`] makes a store from its name.

mod check;
mod comm;
pub mod dist;
mod factory;
mod local;
mod store;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;
mod updater;

pub use comm::{Comm, CommCpu, CommDevice};
pub use factory::create;
pub use local::LocalStore;
pub use store::{Reduced, Store};
pub use updater::StoreUpdater;

pub use crate::optim::ParamKey as Key;
