//! Switchyard's pure evaluation core.
//!
//! A rule pack is data; [`evaluate`] is the one function that turns a pack, a trigger object,
//! a snapshot of the world and a clock into an [`Outcome`]. The CLI's dry-run commands and
//! the in-cluster broker both call it, so what `render` prints is what `run` applies.
//!
//! This crate does no I/O: packs are loaded from in-memory file sets ([`PackFiles`]), the
//! world is a trait the caller implements, and time comes from an injected clock.

pub mod table;
pub mod template;
