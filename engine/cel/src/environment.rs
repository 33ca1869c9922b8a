//! Which CEL environment expressions compile in: a Kubernetes compatibility version, whose
//! base environment decides the libraries, and extensions beyond it.
//!
//! An expression that is valid here is valid in a Kubernetes CRD rule or admission policy
//! at that version, unless it uses an extension: guards copied between a pack and a CRD
//! behave the same. The table follows `IntroducedVersion` in k8s.io/apiserver
//! `pkg/cel/environment/base.go` (Kubernetes 1.34); the libraries' versions are those
//! Kubernetes 1.34 ships (a 1.34 API server at that compatibility version).
//!
//! | Kubernetes | Libraries added |
//! | --- | --- |
//! | 1.28 (oldest) | standard library, optional types, cross-type numeric comparisons, URLs, regex (`find`, `findAll`), Kubernetes lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), quantity, strings version 0 |
//! | 1.29 | strings version 2 (`format`, `strings.quote`, `join`), sets |
//! | 1.30 | IP, CIDR |
//! | 1.31 | format (`format.named`, `format.dns1123Label()`, ...) |
//! | 1.32 | two-variable comprehensions |
//! | 1.33 | semver |
//! | 1.34 | cel-go lists version 3 (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`) |
//!
//! The engine's own functions (`sha256`, `isDNS1123Label`, `isDNS1123Subdomain`,
//! `dns1123Label`, and the custom functions an engine adds) are in every environment, but a
//! strict one ([`crate::Strictness::Kubernetes`]) has only the custom functions.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A Kubernetes compatibility version (`1.34`): its base CEL environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubernetesVersion {
    minor: u32,
}

impl KubernetesVersion {
    /// The oldest version the engine implements: before it, numbers of different types
    /// do not compare and there are no optional values, which the engine cannot switch off.
    pub const OLDEST: KubernetesVersion = KubernetesVersion { minor: 28 };
    /// The newest version the engine implements, the default. (The JSON Schema of
    /// `spec.cel.kubernetes`, in switchyard-core's model, lists the range too.)
    pub const NEWEST: KubernetesVersion = KubernetesVersion { minor: 34 };

    /// Every version the engine implements, oldest first.
    pub fn all() -> impl Iterator<Item = KubernetesVersion> {
        (Self::OLDEST.minor..=Self::NEWEST.minor).map(|minor| KubernetesVersion { minor })
    }

    /// The version `1.minor`, when the engine implements it.
    pub fn from_minor(minor: u32) -> Result<KubernetesVersion, EnvironmentError> {
        let version = KubernetesVersion { minor };
        if (Self::OLDEST..=Self::NEWEST).contains(&version) {
            Ok(version)
        } else {
            Err(EnvironmentError::UnsupportedVersion(version.to_string()))
        }
    }

    /// The minor version (`34` of `1.34`).
    pub fn minor(self) -> u32 {
        self.minor
    }
}

impl Default for KubernetesVersion {
    fn default() -> Self {
        Self::NEWEST
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

impl FromStr for KubernetesVersion {
    type Err = EnvironmentError;

    /// `1.34` (a leading `v` is allowed; a patch version is not: CEL environments change
    /// with minor versions only).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unsupported = || EnvironmentError::UnsupportedVersion(text.to_string());
        let digits = text.strip_prefix('v').unwrap_or(text);
        let (major, minor) = digits.split_once('.').ok_or_else(unsupported)?;
        let is_number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if major != "1" || !is_number(minor) || (minor.len() > 1 && minor.starts_with('0')) {
            return Err(unsupported());
        }
        let minor: u32 = minor.parse().map_err(|_| unsupported())?;
        KubernetesVersion::from_minor(minor).map_err(|_| unsupported())
    }
}

/// A library beyond Kubernetes' base environment, which an environment enables by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Extension {
    /// cel-go's `ext.Bindings`: `cel.bind(name, init, expr)`.
    Bindings,
    /// cel-go's `ext.Encoders`: `base64.encode`, `base64.decode`.
    Encoders,
    /// cel-go's `ext.Math` (version 2): `math.greatest`, `math.least`, `math.ceil`, ...
    Math,
    /// cel-go's `ext.Strings` version 3: `string.reverse()`.
    StringsV3,
}

impl Extension {
    /// Every extension, in the order of their names.
    pub const ALL: [Extension; 4] = [
        Extension::Bindings,
        Extension::Encoders,
        Extension::Math,
        Extension::StringsV3,
    ];

    /// The name packs and the command line use (`strings-v3`).
    pub fn name(self) -> &'static str {
        match self {
            Extension::Bindings => "bindings",
            Extension::Encoders => "encoders",
            Extension::Math => "math",
            Extension::StringsV3 => "strings-v3",
        }
    }
}

impl fmt::Display for Extension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Extension {
    type Err = EnvironmentError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Extension::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| EnvironmentError::UnknownExtension(name.to_string()))
    }
}

/// A version or extension name the engine does not know.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvironmentError {
    #[error(
        "unsupported Kubernetes version '{0}': the engine implements the CEL environments of \
         {oldest} to {newest}",
        oldest = KubernetesVersion::OLDEST,
        newest = KubernetesVersion::NEWEST
    )]
    UnsupportedVersion(String),
    #[error("unknown CEL extension '{0}': the extensions are {known}", known = extension_names())]
    UnknownExtension(String),
}

fn extension_names() -> String {
    Extension::ALL.map(Extension::name).join(", ")
}

/// Where an environment's settings are written, for the messages that name them
/// (`spec.cel.extensions` in a pack, `--extension` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SettingNames {
    pub kubernetes: Option<&'static str>,
    pub extensions: Option<&'static str>,
}

/// The environment expressions compile in: the base environment of a Kubernetes version
/// and the extensions beyond it. The default is the newest version without extensions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CelEnvironment {
    pub kubernetes: KubernetesVersion,
    pub extensions: BTreeSet<Extension>,
    /// How messages name the settings.
    pub setting_names: SettingNames,
}

impl CelEnvironment {
    pub fn new(
        kubernetes: KubernetesVersion,
        extensions: impl IntoIterator<Item = Extension>,
    ) -> CelEnvironment {
        CelEnvironment {
            kubernetes,
            extensions: extensions.into_iter().collect(),
            setting_names: SettingNames::default(),
        }
    }

    /// Everything the engine implements: the newest version and every extension.
    pub fn all() -> CelEnvironment {
        CelEnvironment::new(KubernetesVersion::NEWEST, Extension::ALL)
    }

    /// Names the settings in messages: `kubernetes` (`spec.cel.kubernetes`) and
    /// `extensions` (`spec.cel.extensions`).
    #[must_use]
    pub fn with_setting_names(
        mut self,
        kubernetes: &'static str,
        extensions: &'static str,
    ) -> CelEnvironment {
        self.setting_names = SettingNames {
            kubernetes: Some(kubernetes),
            extensions: Some(extensions),
        };
        self
    }

    pub(crate) fn has(&self, library: Library) -> bool {
        match library.requirement() {
            None => true,
            Some(Requirement::Kubernetes(minor)) => self.kubernetes.minor >= minor,
            Some(Requirement::Extension(extension)) => self.extensions.contains(&extension),
        }
    }

    /// Why `name` is not here: the message of a compile error. `arity` is said for the
    /// macros whose other arities every environment has (`all(k, v, p)`).
    pub(crate) fn unavailable(
        &self,
        name: &str,
        arity: Option<usize>,
        libraries: &BTreeSet<Library>,
    ) -> String {
        let arity = arity.map_or(String::new(), |n| format!(" with {n} arguments"));
        format!(
            "function '{name}'{arity} is not in this environment: {}",
            self.needs(libraries)
        )
    }

    /// What would bring one of `libraries` into the environment: `it needs the extension
    /// 'bindings'`, `it was introduced in Kubernetes 1.30 (...)`.
    pub(crate) fn needs(&self, libraries: &BTreeSet<Library>) -> String {
        let mut clauses = Vec::new();
        if libraries.contains(&Library::Switchyard) {
            // Only a strict environment lacks them (see `Strictness`).
            clauses.push(
                "is the engine's own, which Kubernetes does not have (the environment is strict)"
                    .to_string(),
            );
        }
        for requirement in libraries.iter().filter_map(|l| l.requirement()) {
            let clause = match requirement {
                Requirement::Kubernetes(minor) => {
                    let setting = match self.setting_names.kubernetes {
                        Some(setting) => format!("{setting} is {}", self.kubernetes),
                        None => format!("the environment is Kubernetes {}", self.kubernetes),
                    };
                    format!("was introduced in Kubernetes 1.{minor} ({setting})")
                }
                Requirement::Extension(extension) => match self.setting_names.extensions {
                    Some(setting) => format!("needs the extension '{extension}' ({setting})"),
                    None => format!("needs the extension '{extension}'"),
                },
            };
            if !clauses.contains(&clause) {
                clauses.push(clause);
            }
        }
        format!("it {}", clauses.join(", or "))
    }
}

/// What a library needs to be in an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Requirement {
    /// Kubernetes `1.minor` or later.
    Kubernetes(u32),
    Extension(Extension),
}

/// The library a built-in function or macro belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) enum Library {
    /// In every environment the engine implements: the standard library, optional types,
    /// URLs, regex, Kubernetes' lists library, quantity, strings version 0.
    #[default]
    Base,
    /// The engine's own functions (`sha256`, ...): in every environment but strict ones.
    Switchyard,
    /// cel-go's strings version 2 (`format`, `strings.quote`, `join`): Kubernetes 1.29.
    StringsV2,
    /// cel-go's `ext.Sets`: Kubernetes 1.29.
    Sets,
    /// Kubernetes 1.30.
    Ip,
    /// Kubernetes 1.30.
    Cidr,
    /// Kubernetes 1.31.
    Format,
    /// cel-go's `ext.TwoVarComprehensions`: Kubernetes 1.32.
    TwoVarComprehensions,
    /// Kubernetes 1.33.
    Semver,
    /// cel-go's `ext.Lists` version 3: Kubernetes 1.34.
    Lists,
    Bindings,
    Math,
    Encoders,
    StringsV3,
}

impl Library {
    pub(crate) fn requirement(self) -> Option<Requirement> {
        use Requirement::{Extension as E, Kubernetes as K};
        match self {
            Library::Base | Library::Switchyard => None,
            Library::StringsV2 | Library::Sets => Some(K(29)),
            Library::Ip | Library::Cidr => Some(K(30)),
            Library::Format => Some(K(31)),
            Library::TwoVarComprehensions => Some(K(32)),
            Library::Semver => Some(K(33)),
            Library::Lists => Some(K(34)),
            Library::Bindings => Some(E(Extension::Bindings)),
            Library::Math => Some(E(Extension::Math)),
            Library::Encoders => Some(E(Extension::Encoders)),
            Library::StringsV3 => Some(E(Extension::StringsV3)),
        }
    }
}

/// The macros of the libraries an environment may lack: `(name, called as a method,
/// arity, library)`. Without the library the parser does not expand them, and the call
/// that remains is refused with this library's requirement. `None` is any arity.
pub(crate) const GATED_MACROS: &[(&str, bool, Option<usize>, Library)] = &[
    ("cel.bind", false, Some(3), Library::Bindings),
    ("math.greatest", false, None, Library::Math),
    ("math.least", false, None, Library::Math),
    ("all", true, Some(3), Library::TwoVarComprehensions),
    ("exists", true, Some(3), Library::TwoVarComprehensions),
    ("existsOne", true, Some(3), Library::TwoVarComprehensions),
    ("exists_one", true, Some(3), Library::TwoVarComprehensions),
    (
        "transformList",
        true,
        Some(3),
        Library::TwoVarComprehensions,
    ),
    (
        "transformList",
        true,
        Some(4),
        Library::TwoVarComprehensions,
    ),
    ("transformMap", true, Some(3), Library::TwoVarComprehensions),
    ("transformMap", true, Some(4), Library::TwoVarComprehensions),
    (
        "transformMapEntry",
        true,
        Some(3),
        Library::TwoVarComprehensions,
    ),
    (
        "transformMapEntry",
        true,
        Some(4),
        Library::TwoVarComprehensions,
    ),
    ("sortBy", true, Some(2), Library::Lists),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!("1.34".parse(), Ok(KubernetesVersion::NEWEST));
        assert_eq!("v1.28".parse(), Ok(KubernetesVersion::OLDEST));
        assert_eq!(
            "1.31"
                .parse::<KubernetesVersion>()
                .map(KubernetesVersion::minor),
            Ok(31)
        );
        for bad in [
            "1.27", "1.35", "2.30", "1.3", "1.030", "1.34.1", "", "1", "1.",
        ] {
            let error = bad.parse::<KubernetesVersion>().unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "unsupported Kubernetes version '{bad}': the engine implements the CEL \
                     environments of 1.28 to 1.34"
                )
            );
        }
        assert_eq!(KubernetesVersion::all().count(), 7);
    }

    #[test]
    fn extensions_parse() {
        for e in Extension::ALL {
            assert_eq!(e.name().parse(), Ok(e));
        }
        assert_eq!(
            "maths".parse::<Extension>().unwrap_err().to_string(),
            "unknown CEL extension 'maths': the extensions are bindings, encoders, math, \
             strings-v3"
        );
    }
}
