//! What the Karmada ResourceBinding says: `status.placements`, `status.clusters` and the
//! `Ready` condition.

use serde_json::{Map, Value, json};

use super::access::{Stop, as_str, non_empty, opt, req, type_error};
use super::tables::readiness;

/// status.placements, status.clusters and the Ready condition from the ResourceBinding.
pub(super) fn binding_status(binding: Option<&Value>) -> Result<(Value, Value, Value), Stop> {
    let Some(binding) = binding else {
        let (status, reason, message) = readiness(false, "Unknown", "Unknown")?;
        return Ok((
            json!([]),
            json!([]),
            json!({"type": "Ready", "status": status, "reason": reason, "message": message}),
        ));
    };
    let mut placements = Vec::new();
    let mut cluster_names = Vec::new();
    match opt(req(binding, "spec")?, "clusters")? {
        None => {}
        Some(Value::Array(list)) => {
            for c in list {
                let name = req(c, "name")?;
                cluster_names.push(name);
                let mut p = Map::new();
                p.insert("cluster".into(), name.clone());
                if let Some(r) = opt(c, "replicas")? {
                    p.insert("replicas".into(), r.clone());
                }
                placements.push(Value::Object(p));
            }
        }
        Some(_) => return Err(type_error("spec.clusters is not a list")),
    }
    let status = opt(binding, "status")?;
    let conditions: &[Value] = match status.map(|s| opt(s, "conditions")).transpose()? {
        Some(Some(Value::Array(c))) => c,
        Some(Some(_)) => return Err(type_error("status.conditions is not a list")),
        _ => &[],
    };
    let mut scheduled = None;
    let mut applied = None;
    for c in conditions {
        match req(c, "type")?.as_str() {
            Some("Scheduled") if scheduled.is_none() => scheduled = Some(c),
            Some("FullyApplied") if applied.is_none() => applied = Some(c),
            _ => {}
        }
    }
    let (ready_status, reason, base) = readiness(
        true,
        condition_status(scheduled)?,
        condition_status(applied)?,
    )?;
    let message_of = |c: Option<&Value>| -> Result<Option<String>, Stop> {
        match c.map(|c| opt(c, "message")).transpose()?.flatten() {
            Some(m) if non_empty(m) => Ok(Some(as_str(m, "a condition message")?.to_string())),
            _ => Ok(None),
        }
    };
    let message = match reason {
        "FullyApplied" => {
            let names = cluster_names
                .iter()
                .map(|n| as_str(n, "a binding cluster name"))
                .collect::<Result<Vec<&str>, Stop>>()?;
            format!("{base} ({})", names.join(", "))
        }
        "NotScheduled" => match message_of(scheduled)? {
            Some(m) => format!("{base}: {m}"),
            None => base.to_string(),
        },
        "NotFullyApplied" => match message_of(applied)? {
            Some(m) => format!("{base}: {m}"),
            None => base.to_string(),
        },
        _ => base.to_string(),
    };
    let mut clusters = Vec::new();
    if let Some(status) = status {
        match opt(status, "aggregatedStatus")? {
            None => {}
            Some(Value::Array(list)) => {
                for s in list {
                    let mut c = Map::new();
                    c.insert("cluster".into(), req(s, "clusterName")?.clone());
                    c.insert(
                        "applied".into(),
                        opt(s, "applied")?.cloned().unwrap_or(Value::Bool(false)),
                    );
                    c.insert(
                        "health".into(),
                        opt(s, "health")?
                            .cloned()
                            .unwrap_or_else(|| "Unknown".into()),
                    );
                    if let Some(m) = opt(s, "appliedMessage")? {
                        c.insert("message".into(), m.clone());
                    }
                    clusters.push(Value::Object(c));
                }
            }
            Some(_) => return Err(type_error("status.aggregatedStatus is not a list")),
        }
    }
    Ok((
        Value::Array(placements),
        Value::Array(clusters),
        json!({"type": "Ready", "status": ready_status, "reason": reason, "message": message}),
    ))
}

/// A binding condition's status, `Unknown` without the condition.
pub(super) fn condition_status(condition: Option<&Value>) -> Result<&str, Stop> {
    match condition {
        None => Ok("Unknown"),
        Some(c) => as_str(req(c, "status")?, "a condition status"),
    }
}
