//! Static checks of a compiled table, on the set algebra of `algebra`.
//!
//! Each row is a cube: per input column, the set of inputs its cell matches (null only
//! for "any" cells), restricted to the column's allowed values. Then:
//! - overlap (`unique`): rows `i < j` overlap when their cubes intersect; the witness is a
//!   value from the intersection on each column either row constrains.
//! - dead rows (`first`): row `j` is dead when its cube minus the union of the cubes of
//!   earlier live rows is empty. The difference is computed exactly as a list of disjoint
//!   cubes (`cube_minus` splits one cube by another column by column), which covers both
//!   single-row subsumption and coverage by a union of rows, over finite and infinite
//!   domains alike. The covering rows named are a single subsuming row when there is one,
//!   else an irredundant subset of the intersecting earlier rows (each one needed).
//! - gaps: when every input has a finite domain and there is no default, the full domain
//!   (without null: a missing input is not counted as a gap) minus every row's cube; the
//!   remaining disjoint cubes are counted exactly and the first combinations (in
//!   allowed-value order) listed.
//! - rows matching no allowed value, and a default no input can reach (the full domain
//!   with null minus every row is empty).
//!
//! Every check is bounded in time and memory, because the lint runs whenever a pack loads
//! (`check`, `render`, `test` and the broker) and a pack may come from anyone's pull request:
//! findings are listed up to [`MAX_FINDINGS`] per kind and the rest only counted, and the
//! pairwise and region computations are charged to a [`Budget`] counted in set elements
//! read or written. A check that runs out of budget stops and says so (a
//! `table::lint-budget` warning) instead of a slow or aborted load. An overlap under
//! `unique` is an error however far the scan got: the first pair is enough to refuse it.

use super::algebra::{self, Budget, Cube, Domain, cube_weight};
use super::cell::Lit;
use super::{HitPolicy, Severity, Table, TableLint, TableLocation, row_list};

/// Findings of one kind listed before "and N more".
pub(super) const MAX_FINDINGS: usize = 20;
/// Gap combinations listed before "and N more".
pub(super) const MAX_GAPS: usize = MAX_FINDINGS;
/// Work of each check (overlaps or dead rows; gaps or the default), in set elements: a few
/// hundred milliseconds at most.
pub(super) const BUDGET_WORK: usize = 10_000_000;
/// The largest region of disjoint cubes kept in memory, in set elements (tens of MB).
pub(super) const BUDGET_REGION: usize = 200_000;

pub(super) const CODE_LINT: &str = "table::lint";
pub(super) const CODE_BUDGET: &str = "table::lint-budget";

/// The cubes of a table's rows and the domains of its inputs.
pub(super) struct Analysis<'t> {
    table: &'t Table,
    domains: Vec<Domain>,
    cubes: Vec<Cube>,
}

/// Two rows that can both match one input.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Overlap {
    pub(super) first: usize,
    pub(super) second: usize,
    /// `name=value` parts describing a shared input (empty: they share every input).
    pub(super) witness: Vec<String>,
}

/// The first overlapping pairs, how many were found, and the row where the budget ran out.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OverlapScan {
    pub(super) found: Vec<Overlap>,
    pub(super) total: usize,
    pub(super) stopped_at: Option<usize>,
}

/// The first dead rows, how many were found, and the row where the budget ran out.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DeadScan {
    pub(super) found: Vec<DeadRow>,
    pub(super) total: usize,
    pub(super) stopped_at: Option<usize>,
}

/// A row no input can reach, and the live earlier rows that together cover it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DeadRow {
    pub(super) row: usize,
    pub(super) covered_by: Vec<usize>,
}

/// Input combinations no row matches.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Gaps {
    /// How many combinations (saturating).
    pub(super) total: u128,
    /// The first of them in allowed-value order, as indices into each domain's values.
    pub(super) first: Vec<Vec<usize>>,
}

impl<'t> Analysis<'t> {
    pub(super) fn new(table: &'t Table) -> Self {
        let domains: Vec<Domain> = table
            .inputs
            .iter()
            .map(|c| Domain::new(c.ty, c.allowed.as_deref()))
            .collect();
        let cubes = table
            .rows
            .iter()
            .map(|row| {
                domains
                    .iter()
                    .zip(&row.conds)
                    .map(|(d, c)| d.set(c))
                    .collect()
            })
            .collect();
        Analysis {
            table,
            domains,
            cubes,
        }
    }

    /// Rows whose cells exclude every allowed value of a column: (row, column).
    pub(super) fn never_matching(&self) -> Vec<(usize, usize)> {
        self.cubes
            .iter()
            .enumerate()
            .filter_map(|(r, cube)| cube.iter().position(algebra::Set::is_empty).map(|c| (r, c)))
            .collect()
    }

    /// Pairs of rows that can match the same input, in row order: the first `limit` with
    /// a witness, the others only counted, until the budget runs out.
    pub(super) fn overlaps(&self, limit: usize, budget: &mut Budget) -> OverlapScan {
        let weights: Vec<usize> = self.cubes.iter().map(cube_weight).collect();
        let mut scan = OverlapScan {
            found: Vec::new(),
            total: 0,
            stopped_at: None,
        };
        for (j, b) in self.cubes.iter().enumerate() {
            for (i, a) in self.cubes[..j].iter().enumerate() {
                if !budget.charge(weights[i].min(weights[j])) {
                    scan.stopped_at = Some(j);
                    return scan;
                }
                if !algebra::cubes_intersect(a, b) {
                    continue;
                }
                scan.total += 1;
                if scan.found.len() >= limit {
                    continue;
                }
                let shared = algebra::cube_intersect(a, b);
                let witness = self
                    .domains
                    .iter()
                    .zip(&shared)
                    .zip(&self.table.inputs)
                    .filter_map(|((d, set), col)| {
                        d.witness(set).map(|w| format!("{}{w}", col.name))
                    })
                    .collect();
                scan.found.push(Overlap {
                    first: i,
                    second: j,
                    witness,
                });
            }
        }
        scan
    }

    /// Rows that earlier rows shadow completely (for `first`): the first `limit` with the
    /// rows covering them, the others only counted, until the budget runs out.
    pub(super) fn dead_rows(&self, limit: usize, budget: &mut Budget) -> DeadScan {
        let weights: Vec<usize> = self.cubes.iter().map(cube_weight).collect();
        let mut scan = DeadScan {
            found: Vec::new(),
            total: 0,
            stopped_at: None,
        };
        let mut live: Vec<usize> = Vec::new();
        for (j, cube) in self.cubes.iter().enumerate() {
            if algebra::cube_is_empty(cube) {
                continue;
            }
            let mut candidates: Vec<usize> = Vec::new();
            for &i in &live {
                if !budget.charge(weights[i].min(weights[j])) {
                    scan.stopped_at = Some(j);
                    return scan;
                }
                if algebra::cubes_intersect(&self.cubes[i], cube) {
                    candidates.push(i);
                }
            }
            let subsuming = candidates.iter().copied().find(|&i| {
                budget.charge(weights[j]) && algebra::cube_is_subset(cube, &self.cubes[i])
            });
            if budget.exhausted() {
                scan.stopped_at = Some(j);
                return scan;
            }
            if let Some(i) = subsuming {
                scan.total += 1;
                if scan.found.len() < limit {
                    scan.found.push(DeadRow {
                        row: j,
                        covered_by: vec![i],
                    });
                }
                continue;
            }
            let covered = match self.remainder(cube, &candidates, budget) {
                Some(rest) => rest.is_empty(),
                None => {
                    scan.stopped_at = Some(j);
                    return scan;
                }
            };
            if !covered {
                live.push(j);
                continue;
            }
            scan.total += 1;
            if scan.found.len() >= limit {
                continue;
            }
            // Drop every candidate the others cover without; what is left is irredundant.
            let mut keep = candidates.clone();
            for c in &candidates {
                let trial: Vec<usize> = keep.iter().copied().filter(|k| k != c).collect();
                if self
                    .remainder(cube, &trial, budget)
                    .is_some_and(|rest| rest.is_empty())
                {
                    keep = trial;
                }
            }
            if budget.exhausted() {
                // The cover may not be minimal: stop rather than name a redundant row.
                scan.total -= 1;
                scan.stopped_at = Some(j);
                return scan;
            }
            scan.found.push(DeadRow {
                row: j,
                covered_by: keep,
            });
        }
        scan
    }

    fn remainder(&self, cube: &Cube, rows: &[usize], budget: &mut Budget) -> Option<Vec<Cube>> {
        algebra::remainder(cube, rows.iter().map(|&i| &self.cubes[i]), budget)
    }

    /// The input combinations no row matches, when every input has a finite domain; `None`
    /// when some input does not, `Some(None)` when the budget ran out.
    pub(super) fn gaps(&self, budget: &mut Budget) -> Option<Option<Gaps>> {
        let values: Vec<&[Lit]> = self
            .domains
            .iter()
            .map(Domain::values)
            .collect::<Option<_>>()?;
        let full: Cube = self.domains.iter().map(|d| d.full(false)).collect();
        let Some(rest) = algebra::remainder(&full, &self.cubes, budget) else {
            return Some(None);
        };
        let mut total: u128 = 0;
        let mut first: Vec<Vec<usize>> = Vec::new();
        for cube in &rest {
            let members: Vec<Vec<usize>> = cube
                .iter()
                .zip(&values)
                .map(|(set, vals)| {
                    (0..vals.len())
                        .filter(|&k| set.vals.contains(&vals[k]))
                        .collect()
                })
                .collect();
            let count = members
                .iter()
                .fold(1_u128, |acc, m| acc.saturating_mul(m.len() as u128));
            total = total.saturating_add(count);
            first.extend(lexicographic(&members, MAX_GAPS));
        }
        first.sort();
        first.truncate(MAX_GAPS);
        Some(Some(Gaps { total, first }))
    }

    /// Whether every input, including missing ones, matches some row (so a default is never
    /// used); `None` when the budget ran out.
    pub(super) fn rows_cover_everything(&self, budget: &mut Budget) -> Option<bool> {
        let full: Cube = self.domains.iter().map(|d| d.full(true)).collect();
        algebra::remainder(&full, &self.cubes, budget).map(|rest| rest.is_empty())
    }

    /// Formats a gap combination: `strategy=Spread, paused=true`.
    pub(super) fn describe_combination(&self, combo: &[usize]) -> String {
        if combo.is_empty() {
            return "any input".to_string();
        }
        self.domains
            .iter()
            .zip(&self.table.inputs)
            .zip(combo)
            .filter_map(|((d, col), &k)| {
                d.values()
                    .and_then(|v| v.get(k))
                    .map(|v| format!("{}={v}", col.name))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Up to `limit` index tuples of the product of `members`, in lexicographic order.
fn lexicographic(members: &[Vec<usize>], limit: usize) -> Vec<Vec<usize>> {
    if members.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut pos = vec![0_usize; members.len()];
    while out.len() < limit {
        out.push(pos.iter().zip(members).map(|(&p, m)| m[p]).collect());
        // Advance the odometer from the last column.
        let mut c = members.len();
        loop {
            if c == 0 {
                return out;
            }
            c -= 1;
            pos[c] += 1;
            if pos[c] < members[c].len() {
                break;
            }
            pos[c] = 0;
        }
    }
    out
}

impl Table {
    /// Static checks for `switchyard check`: overlapping rows (`unique`, errors), rows that
    /// can never match (`first` dead rows; any policy for rows matching no allowed value),
    /// input combinations no row matches (when every input has finite values and there is
    /// no default), and a default that can never be used (warnings). Bounded in time and
    /// memory (well under a second); see the module docs.
    pub fn lint(&self) -> Vec<TableLint> {
        lint(self)
    }
}

pub(super) fn lint(table: &Table) -> Vec<TableLint> {
    let analysis = Analysis::new(table);
    let mut lints = Vec::new();
    let row_at = |r: usize| table.rows[r].origin.location();
    let mut push = |severity, location, message: String| {
        lints.push(TableLint {
            severity,
            code: CODE_LINT,
            location,
            message,
        });
    };
    let mut stopped: Vec<String> = Vec::new();

    let never = analysis.never_matching();
    for &(r, c) in never.iter().take(MAX_FINDINGS) {
        let col = &table.inputs[c];
        let which = if col.allowed.is_some() {
            "allowed value"
        } else {
            "value"
        };
        push(
            Severity::Warning,
            row_at(r),
            format!(
                "row {} can never match: no {which} of `{}` satisfies `{}`",
                r + 1,
                col.name,
                table.rows[r].conds[c]
            ),
        );
    }
    if never.len() > MAX_FINDINGS {
        push(
            Severity::Warning,
            table.rows_location(),
            format!(
                "and {} more rows can never match any allowed value",
                never.len() - MAX_FINDINGS
            ),
        );
    }

    let mut budget = Budget::new(BUDGET_WORK, BUDGET_REGION);
    match table.spec.hit_policy {
        HitPolicy::Unique => {
            let scan = analysis.overlaps(MAX_FINDINGS, &mut budget);
            for o in &scan.found {
                let shared = if o.witness.is_empty() {
                    "every input".to_string()
                } else {
                    o.witness.join(", ")
                };
                push(
                    Severity::Error,
                    row_at(o.second),
                    format!(
                        "rows {} and {} overlap: both match {shared}",
                        o.first + 1,
                        o.second + 1
                    ),
                );
            }
            let more = scan.total - scan.found.len();
            if more > 0 {
                let at_least = if scan.stopped_at.is_some() {
                    "at least "
                } else {
                    ""
                };
                push(
                    Severity::Error,
                    table.rows_location(),
                    format!("and {at_least}{more} more pairs of rows overlap"),
                );
            }
            if let Some(r) = scan.stopped_at {
                stopped.push(format!(
                    "rows from row {} on were not checked for overlaps",
                    r + 1
                ));
            }
        }
        HitPolicy::First => {
            let scan = analysis.dead_rows(MAX_FINDINGS, &mut budget);
            for d in &scan.found {
                let message = match d.covered_by.as_slice() {
                    [one] => format!(
                        "row {} can never match: row {} matches every input it matches",
                        d.row + 1,
                        one + 1
                    ),
                    many => format!(
                        "row {} can never match: {} together match every input it matches",
                        d.row + 1,
                        row_list(many)
                    ),
                };
                push(Severity::Warning, row_at(d.row), message);
            }
            let more = scan.total - scan.found.len();
            if more > 0 {
                push(
                    Severity::Warning,
                    table.rows_location(),
                    format!(
                        "and {more} more rows can never match: earlier rows match every input they match"
                    ),
                );
            }
            if let Some(r) = scan.stopped_at {
                stopped.push(format!(
                    "rows from row {} on were not checked for being unreachable",
                    r + 1
                ));
            }
        }
        HitPolicy::Collect => {}
    }

    let mut budget = Budget::new(BUDGET_WORK, BUDGET_REGION);
    if table.default.is_none() {
        match analysis.gaps(&mut budget) {
            Some(Some(gaps)) => {
                for combo in &gaps.first {
                    push(
                        Severity::Warning,
                        table.rows_location(),
                        format!("no row matches {}", analysis.describe_combination(combo)),
                    );
                }
                let shown = gaps.first.len() as u128;
                if gaps.total > shown {
                    push(
                        Severity::Warning,
                        table.rows_location(),
                        format!(
                            "and {} more input combinations match no row (add rows or a `default`)",
                            gaps.total - shown
                        ),
                    );
                }
            }
            Some(None) => {
                stopped.push("input combinations no row matches were not listed".to_string());
            }
            None => {}
        }
    } else {
        match analysis.rows_cover_everything(&mut budget) {
            Some(true) => push(
                Severity::Warning,
                TableLocation::spec("spec.default"),
                "the default is never used: every input, including a missing one, matches some row"
                    .to_string(),
            ),
            Some(false) => {}
            None => stopped.push("whether the default can be used was not checked".to_string()),
        }
    }

    for what in stopped {
        lints.push(TableLint {
            severity: Severity::Warning,
            code: CODE_BUDGET,
            location: table.rows_location(),
            message: format!(
                "the table is too large to check completely: analysis stopped at the budget; {what}"
            ),
        });
    }
    lints
}
