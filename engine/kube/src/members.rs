//! Member clusters found while the broker runs: a role's source (kubeconfig Secrets) reports
//! members found, changed and gone; [`Membership`] tracks which are joining (their watches
//! listing) and which are live, for the broker, `/readyz` and the metrics.
//!
//! A member joins in two steps: its client is made and the watches the packs need in it
//! start; only once every one of them has listed does it become live (the packs' `clusters`
//! name it, their triggers are evaluated again). Packs therefore never act on a member's
//! caches before they are complete. A member whose source drops it stops being watched and
//! written to; what the packs made there stays as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use switchyard_core::object::{cluster_id, is_member_name};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::SecretsSource;

/// The label selecting a role's kubeconfig Secrets.
pub const LABEL_CLUSTER_ROLE: &str = "switchyard.dev/cluster-role";
/// The annotation naming the member a Secret holds (default: the Secret's name).
pub const ANNOTATION_CLUSTER_NAME: &str = "switchyard.dev/cluster-name";

/// How many member names a role's `/readyz` line shows.
const INVENTORY_NAMES: usize = 20;

/// What a role's source reports.
#[derive(Debug)]
pub enum MemberEvent {
    /// A member found, or new credentials for one (a different fingerprint).
    Found {
        /// `ROLE/NAME`.
        cluster: String,
        config: Box<kube::Config>,
        /// A hash of what the credentials were made from: the same one twice is no change.
        fingerprint: u64,
        /// Where it was found: `Secret switchyard-system/c1`.
        from: String,
    },
    /// Something of the source names a member that cannot be used (no kubeconfig, one that
    /// does not parse, a name taken); `None` once it is fixed or gone.
    Unusable {
        from: String,
        problem: Option<String>,
    },
    /// A member the source no longer has.
    Gone {
        cluster: String,
        /// Why, for logs and the triggers' status: `its Secret switchyard-system/c1 was deleted`.
        why: String,
    },
}

/// A kubeconfig's text turned into a client configuration: its current context, and what
/// it embeds (file paths in a Secret's kubeconfig point nowhere).
pub async fn kubeconfig_config(text: &str) -> Result<kube::Config, String> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| e.to_string())?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())
}

fn fingerprint(member: &str, text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    member.hash(&mut hasher);
    text.hash(&mut hasher);
    hasher.finish()
}

/// Watches a role's kubeconfig Secrets until the task is aborted, reporting members found,
/// changed and gone. A relist reports what disappeared meanwhile.
pub async fn watch_secrets(
    client: kube::Client,
    role: String,
    source: SecretsSource,
    events: UnboundedSender<MemberEvent>,
) {
    let api: Api<Secret> = Api::namespaced(client, &source.namespace);
    let config = watcher::Config::default().labels(&format!("{LABEL_CLUSTER_ROLE}={role}"));
    let stream = watcher::watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut secrets = SecretMembers {
        role,
        source,
        known: BTreeMap::new(),
    };
    let mut relist: Vec<Secret> = Vec::new();
    while let Some(event) = stream.next().await {
        let sent = match event {
            Err(e) => {
                tracing::warn!(role = %secrets.role, error = %e, "member Secrets watch failed; resuming");
                continue;
            }
            Ok(Event::Init) => {
                relist.clear();
                true
            }
            Ok(Event::InitApply(secret)) => {
                relist.push(secret);
                true
            }
            Ok(Event::InitDone) => {
                let listed: BTreeSet<String> = relist
                    .iter()
                    .filter_map(|s| s.metadata.name.clone())
                    .collect();
                let vanished: Vec<String> = secrets
                    .known
                    .keys()
                    .filter(|n| !listed.contains(*n))
                    .cloned()
                    .collect();
                let mut sent = true;
                for name in vanished {
                    sent &= secrets.deleted(&name, &events);
                }
                for secret in std::mem::take(&mut relist) {
                    sent &= secrets.applied(&secret, &events).await;
                }
                sent
            }
            Ok(Event::Apply(secret)) => secrets.applied(&secret, &events).await,
            Ok(Event::Delete(secret)) => {
                let name = secret.metadata.name.unwrap_or_default();
                secrets.deleted(&name, &events)
            }
        };
        if !sent {
            return;
        }
    }
}

/// The Secrets of one role and the members they hold.
struct SecretMembers {
    role: String,
    source: SecretsSource,
    /// Secret name -> (member name, fingerprint) of the member it holds, or no member.
    known: BTreeMap<String, Option<(String, u64)>>,
}

impl SecretMembers {
    fn from(&self, secret: &str) -> String {
        format!("Secret {}/{secret}", self.source.namespace)
    }

    /// A Secret created or changed. False when nobody listens any more.
    async fn applied(&mut self, secret: &Secret, events: &UnboundedSender<MemberEvent>) -> bool {
        let Some(name) = secret.metadata.name.clone() else {
            return true;
        };
        let from = self.from(&name);
        let member = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_CLUSTER_NAME))
            .cloned()
            .unwrap_or_else(|| name.clone());
        let text = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&self.source.key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned());
        let previous = self.known.get(&name).cloned().flatten();
        let taken = self
            .known
            .iter()
            .any(|(other, m)| *other != name && m.as_ref().is_some_and(|(n, _)| *n == member));
        let problem = if !is_member_name(&member) {
            Some(format!(
                "member name `{member}` is not a member cluster name (1-253 letters, digits and `-._#:`)"
            ))
        } else if taken {
            Some(format!(
                "member `{}` is already held by another Secret",
                cluster_id(&self.role, &member)
            ))
        } else if text.is_none() {
            Some(format!("no key `{}` holding a kubeconfig", self.source.key))
        } else {
            None
        };
        // A Secret that names another member than before: the previous one is gone.
        if let Some((before, _)) = &previous
            && (*before != member || problem.is_some())
        {
            let gone = MemberEvent::Gone {
                cluster: cluster_id(&self.role, before),
                why: format!("its {from} no longer holds it"),
            };
            if events.send(gone).is_err() {
                return false;
            }
            self.known.insert(name.clone(), None);
        }
        if let Some(problem) = problem {
            self.known.insert(name, None);
            return events
                .send(MemberEvent::Unusable {
                    from,
                    problem: Some(problem),
                })
                .is_ok();
        }
        let text = text.unwrap_or_default();
        let print = fingerprint(&member, &text);
        if previous.as_ref() == Some(&(member.clone(), print)) {
            return true;
        }
        let config = match kubeconfig_config(&text).await {
            Ok(config) => config,
            Err(e) => {
                // Credentials that do not parse: the member keeps its previous ones.
                return events
                    .send(MemberEvent::Unusable {
                        from,
                        problem: Some(format!("key `{}`: {e}", self.source.key)),
                    })
                    .is_ok();
            }
        };
        self.known.insert(name, Some((member.clone(), print)));
        events
            .send(MemberEvent::Unusable {
                from: from.clone(),
                problem: None,
            })
            .is_ok()
            && events
                .send(MemberEvent::Found {
                    cluster: cluster_id(&self.role, &member),
                    config: Box::new(config),
                    fingerprint: print,
                    from,
                })
                .is_ok()
    }

    /// A Secret deleted. False when nobody listens any more.
    fn deleted(&mut self, name: &str, events: &UnboundedSender<MemberEvent>) -> bool {
        let from = self.from(name);
        let Some(known) = self.known.remove(name) else {
            return true;
        };
        let cleared = events
            .send(MemberEvent::Unusable {
                from: from.clone(),
                problem: None,
            })
            .is_ok();
        match known {
            Some((member, _)) => {
                cleared
                    && events
                        .send(MemberEvent::Gone {
                            cluster: cluster_id(&self.role, &member),
                            why: format!("its {from} was deleted"),
                        })
                        .is_ok()
            }
            None => cleared,
        }
    }
}

/// The members found at run time and where each stands, as the broker tracks them.
#[derive(Debug, Default)]
pub struct Membership {
    /// `ROLE/NAME` -> since when it joins (its watches listing).
    pub joining: BTreeMap<String, Instant>,
    /// Live members found at run time.
    pub live: BTreeSet<String>,
    /// Each member's credentials fingerprint and where it was found.
    pub found: BTreeMap<String, (u64, String)>,
    /// Source entries that cannot be used, and why.
    pub unusable: BTreeMap<String, String>,
    /// Watches of joining members that cannot start, and why.
    pub failures: BTreeMap<String, String>,
}

impl Membership {
    /// Lines for `/readyz`: each role's members and those joining; then what cannot be
    /// used. Neither fails readiness: the broker serves every live member.
    pub fn report(&self, roles: &[(String, Vec<String>)]) -> (Vec<String>, Vec<String>) {
        let mut lines = Vec::new();
        for (role, members) in roles {
            let joining: Vec<&str> = self
                .joining
                .keys()
                .filter(|c| switchyard_core::object::split_cluster(c).0 == role)
                .map(String::as_str)
                .collect();
            let mut line = format!("members {role}: {} live", members.len());
            if !members.is_empty() {
                let mut shown: Vec<&str> = members
                    .iter()
                    .take(INVENTORY_NAMES)
                    .map(|m| {
                        if m.is_empty() {
                            "one unnamed cluster"
                        } else {
                            m
                        }
                    })
                    .collect();
                let more = format!("+{} more", members.len().saturating_sub(INVENTORY_NAMES));
                if members.len() > INVENTORY_NAMES {
                    shown.push(&more);
                }
                line.push_str(&format!(" ({})", shown.join(", ")));
            }
            if !joining.is_empty() {
                line.push_str(&format!(
                    "; joining, watches listing: {}",
                    joining.join(", ")
                ));
            }
            lines.push(line);
        }
        let mut problems = Vec::new();
        for (watch, why) in &self.failures {
            problems.push(format!("member watch {watch} cannot start: {why}"));
        }
        for (from, why) in &self.unusable {
            problems.push(format!("{from} cannot be used: {why}"));
        }
        (lines, problems)
    }
}
