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

/// Marks the guards and variables whose value depends only on objects the rule looks up by
/// name (and on the pack's `tables` and `params`), with those lookups (`Expr::shared_by`):
/// the FleetWorkloads of one namespace read the same Fleet, and what a rule makes of the
/// Fleet alone is the same for each of them. An expression qualifies when every name it
/// reads is such a lookup, `tables`, `params`, a CEL type name or `vars`, the variables it
/// selects qualify themselves, and it reads `vars` only field by field. `steps` is the
/// evaluation order: a variable comes after those it reads.
pub(super) fn mark_shared(
    lookups: &[CompiledLookup],
    guards: &mut [CompiledGuard],
    vars: &mut [CompiledVar],
    steps: &[Step],
    type_names: &[&str],
) {
    let by_name: BTreeMap<&str, usize> = lookups
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.finds_list())
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let var_index: BTreeMap<String, usize> = vars
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.clone(), i))
        .collect();
    let mut var_deps: Vec<Option<BTreeSet<usize>>> = vec![None; vars.len()];
    let deps_of = |expr: &Expr, var_deps: &[Option<BTreeSet<usize>>]| {
        let refs = expr.program.references();
        if refs.whole.contains("vars") {
            return None;
        }
        let mut deps = BTreeSet::new();
        for variable in &refs.variables {
            match variable.as_str() {
                "vars" | "tables" | "params" => {}
                name if type_names.contains(&name) => {}
                name => {
                    deps.insert(*by_name.get(name)?);
                }
            }
        }
        for (root, field) in &refs.selections {
            if root == "vars" {
                deps.extend(var_deps[*var_index.get(field)?].as_ref()?.iter().copied());
            }
        }
        Some(deps)
    };
    for step in steps {
        match *step {
            Step::Guard(i) => {
                let deps = deps_of(&guards[i].expr, &var_deps);
                guards[i].expr.shared_by = deps.map(|d| d.into_iter().collect());
            }
            Step::Var(i) => {
                let deps = deps_of(&vars[i].expr, &var_deps);
                vars[i].expr.shared_by = deps.as_ref().map(|d| d.iter().copied().collect());
                var_deps[i] = deps;
            }
            Step::Lookup(_) => {}
        }
    }
}
