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

use crate::config::{AccessProvider, ObjectsSource, SecretsSource};

pub mod kcp;

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
        connection: Connection,
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

/// How a member is reached: a client configuration (a connection of its own), or a client
/// made already (sharing one connection with other members: a kcp URL's workspaces).
pub enum Connection {
    Config(Box<kube::Config>),
    Client(kube::Client),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Connection::Config(config) => write!(f, "Config({})", config.cluster_url),
            Connection::Client(_) => f.write_str("Client"),
        }
    }
}

/// A kubeconfig's text turned into a client configuration: its current context, and what
/// it embeds (file paths in a Secret's kubeconfig point nowhere).
pub async fn kubeconfig_config(text: &str) -> Result<kube::Config, String> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| e.to_string())?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())
}

pub(crate) fn fingerprint(member: &str, text: &str) -> u64 {
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
                    connection: Connection::Config(Box::new(config)),
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

/// The compiled expressions of an `objects` source.
struct ObjectPrograms {
    env: switchyard_cel::Env,
    name: switchyard_cel::Program,
    secret_ref: switchyard_cel::Program,
    usable: Option<switchyard_cel::Program>,
}

impl ObjectPrograms {
    fn compile(source: &ObjectsSource) -> Result<Self, String> {
        let env = switchyard_cel::Env::kubernetes();
        let compile = |field: &str, text: &str| {
            env.compile(text)
                .map_err(|e| format!("`objects.{field}`: {e}"))
        };
        Ok(ObjectPrograms {
            name: compile("name", &source.name)?,
            secret_ref: compile("secretRef", &source.secret_ref)?,
            usable: match &source.usable {
                Some(text) => Some(compile("usable", text)?),
                None => None,
            },
            env,
        })
    }

    fn eval(
        &self,
        field: &str,
        program: &switchyard_cel::Program,
        object: &switchyard_cel::Value,
    ) -> Result<serde_json::Value, String> {
        let mut activation = switchyard_cel::Activation::new(&self.env);
        activation.bind("self", object.clone());
        program
            .eval(&activation)
            .and_then(|v| v.to_json())
            .map_err(|e| format!("`objects.{field}`: {e}"))
    }
}

/// What one object of an `objects` source makes: a member with its kubeconfig, no member
/// (not usable, and why), or a problem.
enum ObjectMember {
    Usable { member: String, kubeconfig: String },
    NotUsable { member: String, why: String },
    Problem(String),
}

/// The name of the `cluster.extensions[]` item holding what a credentials plugin is given
/// (client-go's `ExecCredential.spec.cluster.config`).
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// A ClusterProfile's kubeconfig through the first configured access provider its status
/// lists (`status.accessProviders`, or `status.credentialProviders` of earlier versions of
/// the API): the cluster as the status gives it, the user the provider's exec plugin, or the
/// user of the kubeconfig Secret the entry names (a provider with `kubeconfigSecret`).
fn profile_kubeconfig(
    profile: &serde_json::Value,
    providers: &[AccessProvider],
    secrets: &Listed<Secret>,
    namespace: &str,
) -> Result<String, String> {
    let listed: Vec<&serde_json::Value> = ["accessProviders", "credentialProviders"]
        .iter()
        .filter_map(|field| profile.pointer(&format!("/status/{field}")))
        .filter_map(serde_json::Value::as_array)
        .flatten()
        .collect();
    let found = providers.iter().find_map(|provider| {
        listed
            .iter()
            .find(|p| p.get("name").and_then(serde_json::Value::as_str) == Some(&provider.name))
            .map(|p| (provider, p))
    });
    let Some((provider, entry)) = found else {
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "its status lists no access provider the broker has ({})",
            names.join(", ")
        ));
    };
    let Some(cluster) = entry.get("cluster").filter(|c| c.get("server").is_some()) else {
        return Err(format!(
            "its access provider `{}` gives no cluster server",
            provider.name
        ));
    };
    let name = profile
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("member");
    let user = match &provider.exec_config {
        Some(exec) => serde_json::json!({"exec": exec}),
        None => secret_user(&provider.name, cluster, secrets, namespace)?,
    };
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": provider.name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": provider.name}}],
        "current-context": name,
    });
    serde_json::to_string(&kubeconfig).map_err(|e| e.to_string())
}

/// The user of the kubeconfig Secret an access provider's cluster entry names in its exec
/// extension (`{name, key, namespace, context}`, as the kubeconfig-secretreader plugin reads
/// it): the context's user, else the current context's.
fn secret_user(
    provider: &str,
    cluster: &serde_json::Value,
    secrets: &Listed<Secret>,
    namespace: &str,
) -> Result<serde_json::Value, String> {
    let reference = cluster
        .get("extensions")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .find(|e| e.get("name").and_then(serde_json::Value::as_str) == Some(EXEC_EXTENSION))
        .and_then(|e| e.get("extension"))
        .ok_or_else(|| {
            format!(
                "its access provider `{provider}` names no Secret (no `cluster.extensions[]` item `{EXEC_EXTENSION}`)"
            )
        })?;
    let field = |key: &str| reference.get(key).and_then(serde_json::Value::as_str);
    let (Some(secret_name), Some(key)) = (field("name"), field("key")) else {
        return Err(format!(
            "its access provider `{provider}`: the `{EXEC_EXTENSION}` extension needs `name` and `key`"
        ));
    };
    let secret_namespace = field("namespace").unwrap_or(namespace);
    if secret_namespace != namespace {
        return Err(format!(
            "the Secret {secret_namespace}/{secret_name} it names is outside namespace `{namespace}`, the only one watched"
        ));
    }
    let Some(secret) = secrets.items.get(secret_name) else {
        return Err(format!(
            "the Secret {namespace}/{secret_name} it names does not exist"
        ));
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) else {
        return Err(format!(
            "the Secret {namespace}/{secret_name} it names has no key `{key}`"
        ));
    };
    let text = String::from_utf8_lossy(&bytes.0);
    let bad = |why: &str| format!("the Secret {namespace}/{secret_name}'s kubeconfig: {why}");
    let documents = switchyard_core::yaml::parse_documents(&text).map_err(|e| bad(&e.message))?;
    let kubeconfig = documents
        .first()
        .map(switchyard_core::yaml::Node::to_json)
        .ok_or_else(|| bad("empty"))?;
    let context = field("context")
        .map(str::to_string)
        .or_else(|| {
            kubeconfig
                .get("current-context")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        })
        .ok_or_else(|| bad("no context given and no current-context"))?;
    let named = |list: &str, name: &str| {
        kubeconfig
            .get(list)
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .find(|item| item.get("name").and_then(serde_json::Value::as_str) == Some(name))
            .cloned()
    };
    let user_name = named("contexts", &context)
        .and_then(|c| c.pointer("/context/user").cloned())
        .and_then(|u| u.as_str().map(str::to_string))
        .ok_or_else(|| bad(&format!("no context `{context}` naming a user")))?;
    named("users", &user_name)
        .and_then(|u| u.get("user").cloned())
        .ok_or_else(|| bad(&format!("no user `{user_name}`")))
}

/// Watches the objects of an `objects` source and the Secrets of their namespace until the
/// task is aborted, reporting members found (an object usable whose Secret holds a
/// kubeconfig), changed (the Secret changed) and gone (the object deleted or not usable).
///
/// With `providers` (a ClusterProfiles source), credentials come from the profile's access
/// providers instead of a Secret, and no Secret is watched.
pub async fn watch_objects(
    client: kube::Client,
    role: String,
    source: ObjectsSource,
    providers: Option<Vec<AccessProvider>>,
    events: UnboundedSender<MemberEvent>,
) {
    let whole = format!("{} {} members", source.kind, source.namespace);
    let programs = match ObjectPrograms::compile(&source) {
        Ok(programs) => programs,
        Err(problem) => {
            let _ = events.send(MemberEvent::Unusable {
                from: whole,
                problem: Some(problem),
            });
            return;
        }
    };
    let resource = loop {
        match crate::watch::resolve(&client, &source.api_version, &source.kind).await {
            Ok((resource, _)) => break resource,
            Err(e) => {
                let unusable = MemberEvent::Unusable {
                    from: whole.clone(),
                    problem: Some(format!("cannot resolve the kind: {e}")),
                };
                if events.send(unusable).is_err() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    };
    let _ = events.send(MemberEvent::Unusable {
        from: whole,
        problem: None,
    });
    let objects_api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), &source.namespace, &resource);
    let mut config = watcher::Config::default();
    if let Some(labels) = &source.labels {
        config = config.labels(labels);
    }
    let objects_stream = watcher::watcher(objects_api, config).default_backoff();
    let secrets_api: Api<Secret> = Api::namespaced(client, &source.namespace);
    let secrets_stream =
        watcher::watcher(secrets_api, watcher::Config::default()).default_backoff();
    let mut objects_stream = std::pin::pin!(objects_stream);
    let mut secrets_stream = std::pin::pin!(secrets_stream);
    let mut objects: Listed<serde_json::Value> = Listed::default();
    // Profiles whose providers all run a plugin name no Secret: the Secrets' list is
    // complete (and empty) from the start.
    let watch_secrets = providers
        .as_ref()
        .is_none_or(|providers| providers.iter().any(|p| p.kubeconfig_secret));
    let mut secrets: Listed<Secret> = Listed {
        listed: !watch_secrets,
        ..Listed::default()
    };
    let mut state = ObjectMembers {
        role,
        source,
        providers,
        programs,
        known: BTreeMap::new(),
        problems: BTreeMap::new(),
    };
    loop {
        tokio::select! {
            Some(event) = objects_stream.next() => match event {
                Ok(event) => objects.apply(as_json(event)),
                Err(e) => tracing::warn!(role = %state.role, error = %e, "member objects watch failed; resuming"),
            },
            Some(event) = secrets_stream.next(), if watch_secrets => match event {
                Ok(event) => secrets.apply(event),
                Err(e) => tracing::warn!(role = %state.role, error = %e, "member Secrets watch failed; resuming"),
            },
            else => return,
        }
        if objects.listed && secrets.listed && !state.reconcile(&objects, &secrets, &events).await {
            return;
        }
    }
}

/// A watch event of an object, the object as JSON (what CEL reads).
fn as_json(event: Event<kube::api::DynamicObject>) -> Event<serde_json::Value> {
    let json = |o: kube::api::DynamicObject| serde_json::to_value(o).unwrap_or_default();
    match event {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(json(o)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(json(o)),
        Event::Delete(o) => Event::Delete(json(o)),
    }
}

/// A watched list: the objects by name, and whether it has been listed once.
struct Listed<K> {
    items: BTreeMap<String, K>,
    relist: BTreeMap<String, K>,
    listed: bool,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Listed {
            items: BTreeMap::new(),
            relist: BTreeMap::new(),
            listed: false,
        }
    }
}

/// The name of a watched object.
trait Named {
    fn name(&self) -> String;
}

impl Named for serde_json::Value {
    fn name(&self) -> String {
        self.pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

impl Named for Secret {
    fn name(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }
}

impl<K: Named> Listed<K> {
    fn apply(&mut self, event: Event<K>) {
        match event {
            Event::Init => self.relist.clear(),
            Event::InitApply(item) => {
                self.relist.insert(item.name(), item);
            }
            Event::InitDone => {
                self.items = std::mem::take(&mut self.relist);
                self.listed = true;
            }
            Event::Apply(item) => {
                self.items.insert(item.name(), item);
            }
            Event::Delete(item) => {
                self.items.remove(&item.name());
            }
        }
    }
}

/// The objects of one role's `objects` source and the members they made.
struct ObjectMembers {
    role: String,
    source: ObjectsSource,
    /// A ClusterProfiles source's access providers.
    providers: Option<Vec<AccessProvider>>,
    programs: ObjectPrograms,
    /// Member name -> (fingerprint, where it was found).
    known: BTreeMap<String, (u64, String)>,
    /// Where -> problem, as last reported.
    problems: BTreeMap<String, String>,
}

impl ObjectMembers {
    fn from(&self, object: &str) -> String {
        format!("{} {}/{object}", self.source.kind, self.source.namespace)
    }

    /// What one object makes.
    fn member_of(&self, object: &serde_json::Value, secrets: &Listed<Secret>) -> ObjectMember {
        let value = switchyard_cel::Value::from_json(object);
        let p = &self.programs;
        let member = match p.eval("name", &p.name, &value) {
            Ok(serde_json::Value::String(name)) if is_member_name(&name) => name,
            Ok(other) => {
                return ObjectMember::Problem(format!(
                    "`objects.name` is {other}, not a member cluster name"
                ));
            }
            Err(e) => return ObjectMember::Problem(e),
        };
        if let Some(usable) = &p.usable {
            match p.eval("usable", usable, &value) {
                Ok(serde_json::Value::Bool(true)) => {}
                Ok(serde_json::Value::Bool(false)) => {
                    return ObjectMember::NotUsable {
                        member,
                        why: "it is not usable".into(),
                    };
                }
                Ok(other) => {
                    return ObjectMember::Problem(format!(
                        "`objects.usable` is {other}, not a bool"
                    ));
                }
                // A condition not there yet reads as an error (no such key): not usable.
                Err(e) => {
                    return ObjectMember::NotUsable {
                        member,
                        why: format!("it is not usable ({e})"),
                    };
                }
            }
        }
        if let Some(providers) = &self.providers {
            return match profile_kubeconfig(object, providers, secrets, &self.source.namespace) {
                Ok(kubeconfig) => ObjectMember::Usable { member, kubeconfig },
                Err(why) => ObjectMember::NotUsable { member, why },
            };
        }
        let reference = match p.eval("secretRef", &p.secret_ref, &value) {
            Ok(reference) => reference,
            Err(e) => {
                return ObjectMember::NotUsable {
                    member,
                    why: format!("it names no Secret ({e})"),
                };
            }
        };
        let Some(name) = reference.get("name").and_then(serde_json::Value::as_str) else {
            return ObjectMember::Problem(format!(
                "`objects.secretRef` is {reference}, not a map with a `name`"
            ));
        };
        let key = reference
            .get("key")
            .and_then(serde_json::Value::as_str)
            .unwrap_or(&self.source.key);
        let Some(secret) = secrets.items.get(name) else {
            return ObjectMember::NotUsable {
                member,
                why: format!(
                    "the Secret {}/{name} it names does not exist",
                    self.source.namespace
                ),
            };
        };
        match secret.data.as_ref().and_then(|d| d.get(key)) {
            Some(bytes) => ObjectMember::Usable {
                member,
                kubeconfig: String::from_utf8_lossy(&bytes.0).into_owned(),
            },
            None => ObjectMember::Problem(format!(
                "the Secret {}/{name} it names has no key `{key}`",
                self.source.namespace
            )),
        }
    }

    /// Compares what the objects make now with what was reported, and reports the
    /// difference. False when nobody listens any more.
    async fn reconcile(
        &mut self,
        objects: &Listed<serde_json::Value>,
        secrets: &Listed<Secret>,
        events: &UnboundedSender<MemberEvent>,
    ) -> bool {
        let mut usable: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut not_usable: BTreeMap<String, String> = BTreeMap::new();
        let mut problems: BTreeMap<String, String> = BTreeMap::new();
        for (name, object) in &objects.items {
            let from = self.from(name);
            match self.member_of(object, secrets) {
                ObjectMember::Usable { member, kubeconfig } => {
                    let id = cluster_id(&self.role, &member);
                    match usable.entry(member) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            problems.insert(
                                from,
                                format!("member `{id}` is already named by another object"),
                            );
                        }
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            slot.insert((kubeconfig, from));
                        }
                    }
                }
                ObjectMember::NotUsable { member, why } => {
                    not_usable.insert(member, format!("its {from}: {why}"));
                }
                ObjectMember::Problem(problem) => {
                    problems.insert(from, problem);
                }
            }
        }
        // Gone: members no object makes usable now.
        let gone: Vec<String> = self
            .known
            .keys()
            .filter(|m| !usable.contains_key(*m))
            .cloned()
            .collect();
        for member in gone {
            let Some((_, from)) = self.known.remove(&member) else {
                continue;
            };
            let why = not_usable
                .remove(&member)
                .unwrap_or_else(|| format!("its {from} was deleted or no longer names it"));
            let event = MemberEvent::Gone {
                cluster: cluster_id(&self.role, &member),
                why,
            };
            if events.send(event).is_err() {
                return false;
            }
        }
        for (member, (kubeconfig, from)) in usable {
            let print = fingerprint(&member, &kubeconfig);
            if self.known.get(&member).map(|(f, _)| *f) == Some(print) {
                continue;
            }
            match kubeconfig_config(&kubeconfig).await {
                Ok(config) => {
                    self.known.insert(member.clone(), (print, from.clone()));
                    let found = MemberEvent::Found {
                        cluster: cluster_id(&self.role, &member),
                        connection: Connection::Config(Box::new(config)),
                        fingerprint: print,
                        from,
                    };
                    if events.send(found).is_err() {
                        return false;
                    }
                }
                Err(e) => {
                    problems.insert(from, format!("its Secret's kubeconfig: {e}"));
                }
            }
        }
        // Problems reported as they change.
        let sent = report_problems(&self.problems, &problems, events);
        self.problems = problems;
        sent
    }
}

/// Sends what changed between the problems reported before and now: cleared ones, then new
/// or changed ones. False when the receiver is gone.
pub(crate) fn report_problems(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
    events: &UnboundedSender<MemberEvent>,
) -> bool {
    let cleared = before
        .keys()
        .filter(|from| !now.contains_key(*from))
        .map(|from| (from, None));
    let changed = now
        .iter()
        .filter(|(from, problem)| before.get(*from) != Some(problem))
        .map(|(from, problem)| (from, Some(problem.clone())));
    cleared.chain(changed).all(|(from, problem)| {
        events
            .send(MemberEvent::Unusable {
                from: from.clone(),
                problem,
            })
            .is_ok()
    })
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
