//! The pack's decision tables, as `match`es.

use super::access::{Stop, type_error};

/// `tables/strategies.yaml`.
pub(super) struct Scheduling {
    pub(super) replica_scheduling_type: &'static str,
    pub(super) replica_division_preference: Option<&'static str>,
    pub(super) static_weights: bool,
    pub(super) dynamic_weight: Option<&'static str>,
    pub(super) spread_constraints: bool,
}

pub(super) fn strategies(strategy: &str, has_weights: bool) -> Result<Scheduling, Stop> {
    let divided = |static_weights, dynamic_weight, spread_constraints| Scheduling {
        replica_scheduling_type: "Divided",
        replica_division_preference: Some("Weighted"),
        static_weights,
        dynamic_weight,
        spread_constraints,
    };
    let duplicated = Scheduling {
        replica_scheduling_type: "Duplicated",
        replica_division_preference: None,
        static_weights: false,
        dynamic_weight: None,
        spread_constraints: false,
    };
    match (strategy, has_weights) {
        ("Weighted", true) => Ok(divided(true, None, false)),
        ("Weighted", false) => Ok(divided(false, None, false)),
        ("Spread", _) => Ok(divided(false, Some("AvailableReplicas"), true)),
        ("FixedReplicas" | "None", _) => Ok(duplicated),
        _ => Err(type_error("strategy outside the table")),
    }
}

/// `tables/requirement-targets.{yaml,csv}`: `Ok(true)` for fieldSelector, `Ok(false)` for
/// labelSelector, `Err(problem)` for invalid.
pub(super) fn requirement_target(
    key: &str,
    operator: &str,
    has_values: bool,
) -> Result<bool, &'static str> {
    let cluster_field = matches!(key, "provider" | "region" | "zone");
    match (cluster_field, operator, has_values) {
        (true, "In" | "NotIn", true) => Ok(true),
        (true, _, _) => Err(
            "the cluster fields provider, region and zone take only the operators In and NotIn, with values",
        ),
        (false, "In" | "NotIn", true) | (false, "Exists" | "DoesNotExist", false) => Ok(false),
        _ => Err(
            "the operator must be In or NotIn with values, or Exists or DoesNotExist without values",
        ),
    }
}

/// `tables/readiness.yaml`: (status, reason, message).
pub(super) fn readiness(
    binding_found: bool,
    scheduled: &str,
    fully_applied: &str,
) -> Result<(&'static str, &'static str, &'static str), Stop> {
    let allowed = |s: &str| matches!(s, "True" | "False" | "Unknown");
    if !allowed(scheduled) || !allowed(fully_applied) {
        return Err(type_error(
            "a binding condition status outside True, False, Unknown",
        ));
    }
    Ok(match (binding_found, scheduled, fully_applied) {
        (false, _, _) => (
            "Unknown",
            "BindingPending",
            "waiting for the workload to be scheduled",
        ),
        (true, "False" | "Unknown", _) => {
            ("False", "NotScheduled", "the workload is not scheduled")
        }
        (true, _, "False" | "Unknown") => (
            "False",
            "NotFullyApplied",
            "the workload is scheduled but not applied on every cluster",
        ),
        (true, _, _) => (
            "True",
            "FullyApplied",
            "the workload is applied on every scheduled cluster",
        ),
    })
}
