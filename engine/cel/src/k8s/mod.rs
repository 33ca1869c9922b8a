//! Kubernetes' CEL libraries, as plain Rust: the functions of
//! `k8s.io/apiserver/pkg/cel/library` and the cel-go extensions Kubernetes' base
//! environment enables, with Kubernetes' names, results and error messages.
//!
//! Each library is a module of ordinary Rust types and functions that knows nothing of the
//! evaluator ([`quantity`], [`url`], [`ip`], [`cidr`], [`semver`], [`format`], [`lists`],
//! [`regex`], [`sets`]); `register.rs` adapts them to the evaluator's [`Value`](crate::registry::Value)s and
//! [`crate::registry`], and [`overloads`] / [`types`] are what the environment registers.
//!
//! # Functions
//!
//! "Since" is the Kubernetes version whose base environment (`environment/base.go`,
//! `IntroducedVersion`) added the library; Kubernetes accepts *new* expressions using it one
//! minor version later (its compatibility version is the previous release), which is what
//! the "CEL in Kubernetes" page lists.
//!
//! | Library | Functions | Since |
//! | --- | --- | --- |
//! | URLs | `url(string)`, `isURL(string)`; `URL.getScheme()`, `getHost()`, `getHostname()`, `getPort()`, `getEscapedPath()`, `getQuery()` | all versions |
//! | Regex | `string.find(string)`, `string.findAll(string)`, `string.findAll(string, int)` | all versions |
//! | Lists | `list.isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)`, `lastIndexOf(x)` | all versions |
//! | Quantity | `quantity(string)`, `isQuantity(string)`, `sign(Quantity)`; `Quantity.isLessThan(Quantity)`, `isGreaterThan`, `compareTo`, `add(Quantity\|int)`, `sub(Quantity\|int)`, `asInteger()`, `isInteger()`, `asApproximateFloat()` | 1.28 |
//! | Sets (cel-go) | `sets.contains(list, list)`, `sets.equivalent`, `sets.intersects` | 1.29 |
//! | IP | `ip(string)`, `isIP(string)`, `ip.isCanonical(string)`, `string(IP)`; `IP.family()`, `isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`, `isGlobalUnicast()` | 1.30 |
//! | CIDR | `cidr(string)`, `isCIDR(string)`, `string(CIDR)`; `CIDR.containsIP(IP\|string)`, `containsCIDR(CIDR\|string)`, `ip()`, `masked()`, `prefixLength()` | 1.30 |
//! | Format | `format.named(string)` (optional), `format.dns1123Label()`, `dns1123Subdomain()`, `dns1035Label()`, `qualifiedName()`, `dns1123LabelPrefix()`, `dns1123SubdomainPrefix()`, `dns1035LabelPrefix()`, `labelValue()`, `uri()`, `uuid()`, `byte()`, `date()`, `datetime()`; `Format.validate(string)` (optional list of messages) | 1.31 |
//! | Semver (version 1) | `semver(string)`, `semver(string, bool)`, `isSemver(string)`, `isSemver(string, bool)`; `Semver.major()`, `minor()`, `patch()`, `isLessThan(Semver)`, `isGreaterThan`, `compareTo` | 1.33 |
//! | Lists (cel-go, version 3) | `list.slice(int, int)`, `flatten()`, `flatten(int)`, `distinct()`, `reverse()`, `sort()`, `sortBy(e, key)` (a macro over `@sortByAssociatedKeys`), `lists.range(int)` | 1.34 |
//!
//! The type names are `kubernetes.Quantity`, `kubernetes.URL`, `net.IP`, `net.CIDR`,
//! `kubernetes.Semver` and `kubernetes.NamedFormat`; `net.IP` and `net.CIDR` are also
//! usable as type values (`type(x) == net.IP`), as in Kubernetes.
//!
//! Not here: the authorizer library (`authz`, 1.27) and its selectors (1.31), which need a
//! request context; the image library (1.33); the quantity `mul`/`div` of an unmerged
//! Kubernetes pull request; the DRA-only `includes` (Kubernetes' list library version 1,
//! provided as [`lists::includes`] but not registered).
//!
//! # Faithfulness
//!
//! The ports follow Kubernetes' code where its own documentation disagrees with it, and say
//! so in their tests: `quantity('Mi')` is `0` (not an error), `sign` is a global function,
//! `'123 abc 456'.findAll('[0-9]*')` includes empty matches, `cidr('192.168.0.1/16')` is
//! valid, `asInteger()` fails on `quantity('1000m')` and `quantity('1.5Gi')` (Go's
//! `AsInt64` answers only from its `int64` representation). Each module lists what it
//! cannot reproduce.
//!
//! # Registration
//!
//! ```ignore
//! let mut registry = Registry::default();
//! registry.add_all(k8s::overloads());
//! for (t, library) in k8s::types() {
//!     registry.add_type(t, library);
//! }
//! ```

pub mod cidr;
pub(crate) mod decimal;
pub mod format;
pub(crate) mod go;
pub mod ip;
pub mod lists;
pub mod quantity;
pub mod regex;
mod register;
pub mod semver;
pub mod sets;
pub mod url;

#[cfg(test)]
mod tests;

pub(crate) use register::{overloads, types};

/// What compiling a Go (RE2) pattern of `find`/`findAll` costs.
pub(crate) fn pattern_cost(pattern: &str) -> u64 {
    regex::compile_cost(pattern)
}
