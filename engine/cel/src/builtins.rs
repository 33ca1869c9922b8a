//! The built-in libraries, registered into one [`Registry`]: the standard library, the math
//! and encoders extensions and the Kubernetes libraries, each overload tagged with its
//! library. Every environment keeps the overloads of its libraries from it; the compiler and
//! the cost estimator look in it too.

use std::sync::LazyLock;

use crate::environment::Library;
use crate::registry::Registry;

/// Every built-in function and library type the engine implements: the standard library,
/// the Kubernetes libraries and the extensions, each overload tagged with its library. The
/// cost estimator reads the same registry.
pub(crate) fn builtin_registry() -> Registry {
    let mut registry = Registry::default();
    crate::stdlib::register(&mut registry);
    registry.add_all(
        crate::math::overloads()
            .into_iter()
            .map(|o| o.in_library(Library::Math)),
    );
    registry.add_all(
        crate::encoders::overloads()
            .into_iter()
            .map(|o| o.in_library(Library::Encoders)),
    );
    registry.add_all(crate::k8s::overloads());
    for (t, library) in crate::k8s::types() {
        registry.add_type(t, library);
    }
    registry
}

/// [`builtin_registry`], built once: what every environment filters, and what the
/// compiler looks in for the library of a function an environment does not have.
pub(crate) static FULL_REGISTRY: LazyLock<Registry> = LazyLock::new(builtin_registry);
