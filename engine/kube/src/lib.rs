//! The broker runtime behind `switchyard run`: the only crate that talks to Kubernetes.
//!
//! It watches the objects loaded packs need in several clusters, keeps them in caches that
//! are the core's [`switchyard_core::World`], evaluates triggers with the same
//! [`switchyard_core::evaluate()`] the dry-run commands use, and makes the clusters match:
//! server-side apply of outputs, prune of what is no longer desired, status and finalizers on
//! triggers, hot reload of packs.

pub mod apply;
pub mod broker;
pub mod clusters;
pub mod config;
pub mod controller;
pub mod failure;
pub mod health;
pub mod instrument;
pub mod leader;
pub mod members;
pub mod metrics;
pub mod packs;
pub mod queue;
pub mod reachability;
pub mod reload;
pub mod serve;
pub mod shards;
pub mod store;
pub mod watch;
pub mod workers;

pub use broker::{BrokerError, Handle, run};
