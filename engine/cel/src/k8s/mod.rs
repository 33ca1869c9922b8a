//! Kubernetes' CEL libraries (placeholder header; see below).

pub mod cidr;
pub(crate) mod decimal;
pub(crate) mod go;
pub mod ip;
pub mod quantity;
pub mod semver;
pub mod url;
