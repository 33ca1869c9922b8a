//! Why a write to a cluster failed, in the terms the broker acts on: whether to retry soon
//! (the cluster is down or busy), later (the request itself is refused: 400, 403, 422), or
//! at once (a conflict), and what a trigger's condition and the logs say about it.

use kube::Error as KubeError;

/// Kubernetes caps an Event's note at 1 KiB; conditions carry no more.
pub const MESSAGE_LIMIT: usize = 1024;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("no cluster `{0}` is configured")]
    UnknownCluster(String),
    #[error(
        "{api_version} {kind} is not served by cluster `{cluster}`: {}",
        describe(source)
    )]
    Discovery {
        cluster: String,
        api_version: String,
        kind: String,
        #[source]
        source: Box<KubeError>,
    },
    /// The object's namespace (or its absence) disagrees with the kind's scope as the
    /// cluster serves it: nothing is written.
    #[error(
        "{object}: {api_version} {kind} is {} in cluster `{cluster}`, and the object has {}",
        if *.namespaced { "namespaced" } else { "cluster-scoped" },
        if *.namespaced { "no namespace" } else { "a namespace" }
    )]
    ScopeMismatch {
        object: String,
        cluster: String,
        api_version: String,
        kind: String,
        namespaced: bool,
    },
    #[error("{action} {object}: {}", describe(source))]
    Api {
        action: &'static str,
        object: String,
        /// The cluster the call went to (`karmada`, `mesh/eu-1`).
        cluster: String,
        #[source]
        source: Box<KubeError>,
    },
}

/// What kind of failure it is, for how soon to retry and who to tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The cluster is unreachable, overloaded or failing (connection errors, timeouts, 429,
    /// 5xx): nothing a tenant can act on; retried soon, and at once when the cluster is back.
    Infrastructure,
    /// The API server refuses the request itself (400, 401, 403, 405, 413, 415, 422; a kind
    /// it does not serve): retrying changes nothing until someone changes the pack, the
    /// object or the permissions; retried slowly.
    Permanent,
    /// A precondition failed (409): the next attempt reads a newer object.
    Conflict,
    /// Anything else (404 of a namespace not created yet, ...): the usual backoff.
    Other,
}

impl ApplyError {
    /// The Kubernetes status of an API answer, if the failure is one.
    fn status(&self) -> Option<&kube::core::Status> {
        match self {
            ApplyError::Api { source, .. } | ApplyError::Discovery { source, .. } => {
                match &**source {
                    KubeError::Api(status) => Some(status),
                    _ => None,
                }
            }
            ApplyError::UnknownCluster(_) | ApplyError::ScopeMismatch { .. } => None,
        }
    }

    pub fn kind(&self) -> FailureKind {
        match self {
            ApplyError::UnknownCluster(_) | ApplyError::ScopeMismatch { .. } => {
                FailureKind::Permanent
            }
            ApplyError::Discovery { .. } | ApplyError::Api { .. } => match self.status() {
                Some(status) => match status.code {
                    409 => FailureKind::Conflict,
                    429 | 500..=599 => FailureKind::Infrastructure,
                    400 | 401 | 403 | 405 | 413 | 415 | 422 => FailureKind::Permanent,
                    // Discovery of a kind the cluster does not serve.
                    404 if matches!(self, ApplyError::Discovery { .. }) => FailureKind::Permanent,
                    _ => FailureKind::Other,
                },
                // No answer at all: the connection, TLS, a timeout.
                None => FailureKind::Infrastructure,
            },
        }
    }

    /// The cluster the failed call went to.
    pub fn cluster(&self) -> &str {
        match self {
            ApplyError::UnknownCluster(cluster)
            | ApplyError::ScopeMismatch { cluster, .. }
            | ApplyError::Discovery { cluster, .. }
            | ApplyError::Api { cluster, .. } => cluster,
        }
    }

    /// The reason a condition carries: the API's own (`Forbidden`, `Invalid`,
    /// `AlreadyExists`), `ClusterUnavailable` when the cluster did not answer (or answered
    /// 429 or 5xx), or ours.
    pub fn reason(&self) -> String {
        if self.kind() == FailureKind::Infrastructure {
            // Down, overloaded or failing: one reason a dashboard can count; the message says
            // which (`connection refused`, the API's 503 or 429).
            return "ClusterUnavailable".to_string();
        }
        match (self, self.status()) {
            (ApplyError::UnknownCluster(_), _) => "UnknownCluster".to_string(),
            (ApplyError::ScopeMismatch { .. }, _) => "ScopeMismatch".to_string(),
            (ApplyError::Discovery { .. }, _) => "KindNotServed".to_string(),
            (_, Some(status)) if !status.reason.is_empty() => status.reason.clone(),
            _ => "ApplyFailed".to_string(),
        }
    }

    /// The message a condition or an Event carries: what was done to which object and the
    /// API's own message, at most [`MESSAGE_LIMIT`] bytes.
    pub fn message(&self) -> String {
        truncate(&self.to_string(), MESSAGE_LIMIT)
    }

    /// The cause alone, without the action and the object (`connection refused`).
    pub fn cause(&self) -> String {
        match self {
            ApplyError::UnknownCluster(_) | ApplyError::ScopeMismatch { .. } => self.to_string(),
            ApplyError::Discovery { source, .. } | ApplyError::Api { source, .. } => {
                truncate(&describe(source), MESSAGE_LIMIT)
            }
        }
    }

    /// The API answered 409: a precondition (uid) failed.
    pub fn is_conflict(&self) -> bool {
        self.status().is_some_and(|s| s.code == 409)
    }

    /// The API answered 409 with reason `AlreadyExists`: a create found the name taken.
    pub fn is_already_exists(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code == 409 && s.reason == "AlreadyExists")
    }

    /// The API answered 404.
    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(|s| s.code == 404)
    }

    /// The API answered 403.
    pub fn is_forbidden(&self) -> bool {
        self.status().is_some_and(|s| s.code == 403)
    }
}

/// A kube error as one line: the API's message for an API answer, else each cause in turn
/// (`tcp connect error: Connection refused`), never a Rust debug dump.
pub fn describe(error: &KubeError) -> String {
    if let KubeError::Api(status) = error {
        return if status.message.is_empty() {
            format!("{} ({})", status.reason, status.code)
        } else {
            status.message.clone()
        };
    }
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        let text = e.to_string();
        // Wrappers repeat their source (`ServiceError: client error (Connect)`); keep what
        // each level adds.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

/// `text` cut to at most `limit` bytes at a character boundary, with `...` when cut.
pub fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> ApplyError {
        ApplyError::Api {
            action: "apply",
            object: "karmada:Deployment.apps:ns/web".into(),
            cluster: "karmada".into(),
            source: Box::new(KubeError::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                message: message.into(),
                ..kube::core::Status::default()
            }))),
        }
    }

    #[test]
    fn api_answers_keep_their_reason_and_message() {
        let e = api(
            403,
            "Forbidden",
            "deployments.apps \"web\" is forbidden: User \"sa\" cannot patch resource",
        );
        assert_eq!(e.kind(), FailureKind::Permanent);
        assert_eq!(e.reason(), "Forbidden");
        assert_eq!(
            e.message(),
            "apply karmada:Deployment.apps:ns/web: deployments.apps \"web\" is forbidden: User \"sa\" cannot patch resource"
        );
        assert_eq!(api(422, "Invalid", "x").kind(), FailureKind::Permanent);
        assert_eq!(api(409, "Conflict", "x").kind(), FailureKind::Conflict);
        assert!(api(409, "AlreadyExists", "x").is_already_exists());
        assert_eq!(
            api(503, "ServiceUnavailable", "x").kind(),
            FailureKind::Infrastructure
        );
        assert_eq!(
            api(503, "ServiceUnavailable", "x").reason(),
            "ClusterUnavailable"
        );
        assert_eq!(api(404, "NotFound", "x").kind(), FailureKind::Other);
    }

    #[test]
    fn messages_are_bounded() {
        let long = "é".repeat(2000);
        let message = api(422, "Invalid", &long).message();
        assert!(message.len() <= MESSAGE_LIMIT, "{}", message.len());
        assert!(message.ends_with("..."));
    }
}
