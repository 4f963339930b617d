//! What a benchmark returns: the compared systems' figures, a headline against the paper
//! and our goal, and a table for people (docs/benchmarks.md documents the JSON).

use std::fmt;

use serde::Serialize;

/// One benchmark run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The benchmark's name.
    pub bench: String,
    pub seed: u64,
    pub quick: bool,
    /// Per compared system, its measured figures (an object keyed by system name).
    pub systems: serde_json::Value,
    pub headline: Headline,
    /// Every headline of a benchmark judged on more than one figure (the demo), `headline`
    /// being the first; empty (and left out of the JSON) for the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headlines: Vec<Headline>,
    /// What a reader needs to interpret the numbers (setup, caveats, what was not measured).
    pub notes: Vec<String>,
    /// The human table (not part of the JSON).
    #[serde(skip)]
    pub table: Table,
}

/// The one number a benchmark is judged by.
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    /// What is compared, in words.
    pub metric: String,
    pub value: f64,
    /// The paper's number, where it has one.
    pub paper: Option<f64>,
    /// Our goal.
    pub goal: f64,
    pub higher_is_better: bool,
    /// Whether `value` meets `goal`.
    pub met: bool,
    /// The same figure for the baseline to beat, measured in the same run (the demo:
    /// Linux MPTCP), where the report shows one beside ours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
}

/// A baseline's figure beside a headline.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    /// The baseline system, as the report's table names it.
    pub system: String,
    /// Its value of the headline's metric (null where it could not run).
    pub value: Option<f64>,
}

impl Headline {
    pub fn new(
        metric: impl Into<String>,
        value: f64,
        paper: Option<f64>,
        goal: f64,
        higher_is_better: bool,
    ) -> Headline {
        let met = if higher_is_better {
            value >= goal
        } else {
            value <= goal
        };
        Headline {
            metric: metric.into(),
            value,
            paper,
            goal,
            higher_is_better,
            met,
            baseline: None,
        }
    }

    /// This headline with `system`'s value of the same metric beside it.
    pub fn with_baseline(mut self, system: impl Into<String>, value: f64) -> Headline {
        self.baseline = Some(Baseline {
            system: system.into(),
            value: value.is_finite().then_some(value),
        });
        self
    }
}

impl fmt::Display for Headline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cmp = if self.higher_is_better { ">=" } else { "<=" };
        write!(f, "{}: {:.3}", self.metric, self.value)?;
        if let Some(p) = self.paper {
            write!(f, " (paper {p})")?;
        }
        if let Some(b) = &self.baseline {
            match b.value {
                Some(v) => write!(f, " ({} {v:.3})", b.system)?,
                None => write!(f, " ({} did not run)", b.system)?,
            }
        }
        write!(
            f,
            ", goal {cmp} {}: {}",
            self.goal,
            if self.met { "met" } else { "NOT met" }
        )
    }
}

/// A table of strings with a header row.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Table {
        Table {
            columns: columns.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.columns.len();
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                // First column left-aligned (names), the rest right-aligned (numbers).
                if i == 0 {
                    write!(f, "{c:<w$}")?;
                } else {
                    write!(f, "  {c:>w$}")?;
                }
            }
            writeln!(f)
        };
        line(f, &self.columns)?;
        let total = widths.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        writeln!(f, "{}", "-".repeat(total))?;
        for r in &self.rows {
            line(f, r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_judges_both_directions() {
        assert!(Headline::new("x", 2.0, None, 1.5, true).met);
        assert!(!Headline::new("x", 1.0, None, 1.5, true).met);
        assert!(Headline::new("x", 1.0, None, 1.05, false).met);
        assert!(!Headline::new("x", 1.1, Some(1.2), 1.05, false).met);
    }

    #[test]
    fn baseline_prints_beside_the_value() {
        let h = Headline::new("x", 0.5, None, 0.9, true).with_baseline("MPTCP", 0.75);
        assert_eq!(
            h.to_string(),
            "x: 0.500 (MPTCP 0.750), goal >= 0.9: NOT met"
        );
        let h = Headline::new("x", 0.5, None, 0.9, true).with_baseline("MPTCP", f64::NAN);
        assert!(h.to_string().contains("MPTCP did not run"));
        assert_eq!(
            serde_json::to_value(&h).unwrap()["baseline"]["value"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new(["system", "fct"]);
        t.row(["a", "1"]);
        t.row(["longer", "100"]);
        let s = t.to_string();
        assert_eq!(s.lines().next(), Some("system  fct"));
        assert_eq!(s.lines().nth(3), Some("longer  100"));
    }
}
