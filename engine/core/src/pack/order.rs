//! The evaluation order of a rule's lookups, guards and variables.

use super::*;

/// Orders lookups, guards and variables so each runs after what it reads. Among the steps
/// that are ready, guards go first (so they can protect what follows), then lookups, then
/// variables, each in declaration order.
pub(super) fn order_steps(
    lookups: &[CompiledLookup],
    guards: &[CompiledGuard],
    vars: &[CompiledVar],
) -> Result<Vec<Step>, Vec<String>> {
    let lookup_index: BTreeMap<&str, usize> = lookups
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let var_index: BTreeMap<&str, usize> = vars
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    let deps_of = |exprs: Vec<&Expr>| -> BTreeSet<Step> {
        let mut deps = BTreeSet::new();
        for expr in exprs {
            let refs = expr.program.references();
            for variable in &refs.variables {
                if let Some(i) = lookup_index.get(variable.as_str()) {
                    deps.insert(Step::Lookup(*i));
                }
            }
            for (root, field) in &refs.selections {
                if root == "vars"
                    && let Some(i) = var_index.get(field.as_str())
                {
                    deps.insert(Step::Var(*i));
                }
            }
        }
        deps
    };
    let mut pending: Vec<(Step, BTreeSet<Step>, String)> = Vec::new();
    for (i, g) in guards.iter().enumerate() {
        let mut exprs = vec![&g.expr];
        exprs.extend(g.message_expr.iter());
        pending.push((Step::Guard(i), deps_of(exprs), format!("guard {}", i + 1)));
    }
    for (i, l) in lookups.iter().enumerate() {
        let mut exprs: Vec<&Expr> = l
            .namespace
            .iter()
            .chain(l.when.iter())
            .chain(l.cluster_name.iter())
            .collect();
        match &l.key {
            LookupKey::Name(e) | LookupKey::Labels(e) => exprs.push(e),
        }
        pending.push((Step::Lookup(i), deps_of(exprs), l.name.clone()));
    }
    for (i, v) in vars.iter().enumerate() {
        pending.push((
            Step::Var(i),
            deps_of(vec![&v.expr]),
            format!("vars.{}", v.name),
        ));
    }
    let mut done: BTreeSet<Step> = BTreeSet::new();
    let mut order = Vec::new();
    while !pending.is_empty() {
        let ready = pending
            .iter()
            .position(|(step, deps, _)| deps.iter().all(|d| done.contains(d) || d == step));
        match ready {
            Some(i) => {
                let (step, _, _) = pending.remove(i);
                done.insert(step);
                order.push(step);
            }
            None => return Err(pending.iter().map(|(_, _, name)| name.clone()).collect()),
        }
    }
    Ok(order)
}

impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Step {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |s: &Step| match s {
            Step::Guard(i) => (0, *i),
            Step::Lookup(i) => (1, *i),
            Step::Var(i) => (2, *i),
        };
        key(self).cmp(&key(other))
    }
}
