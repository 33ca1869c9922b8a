//! Bench-only code: the `kcp-karmada` rule pack against a hand-written Rust equivalent.
//!
//! - [`load_pack`] reads `rules/kcp-karmada` (and the repository's shared partials in
//!   `templates/`) the way `switchyard` reads a pack folder;
//! - [`generate`] builds a deterministic world of `n` FleetWorkloads with their Fleets,
//!   PlacementPolicies and some Karmada ResourceBindings;
//! - [`handwritten()`] renders the same desired objects, status patches and conflicts as
//!   `plan(&pack, &world, now)`, in plain Rust (decision tables as `match`es);
//! - [`fleet_workloads_yaml`] writes the render benchmark's input file and
//!   [`measure_render`] times `switchyard render` of it (wall time, peak RSS).
//!
//! Nothing here is used by the engine; the agreement test (`tests/agree.rs`) keeps
//! [`handwritten()`] honest, and `benches/render.rs` compares the two.

pub mod broker_world;
mod generate;
pub mod handwritten;
mod pack;
mod render_run;

pub use generate::{RENDER_WORKSPACES, fleet_workloads_yaml, generate};
pub use handwritten::{Rendered, TriggerResult, handwritten};
pub use pack::{Objects, PACK_DIR, example_inputs, load_pack, pack_files, repo_root};
pub use render_run::{RenderFigures, measure_render, release_cli};
