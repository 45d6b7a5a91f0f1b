//! Timed tablet changes for the standalone binary (`testbed --tablet-script
//! FILE`): migrate a tablet or split a table's tablets at given times, so a
//! driver pointed at the binary can be watched following tablets that move.
//!
//! One step per line, `#` starts a comment:
//!
//! ```text
//! # seconds after start  action
//! 5    migrate ks.t 3 0 1 2   # tablet 3 (token order), replica 0 -> node 1, shard 2
//! 10   split ks.t             # every tablet of ks.t in two
//! 15   leader ks.sc 3 1       # tablet 3 of strongly consistent ks.sc: replica 1 leads
//! ```

use std::fmt;
use std::time::Duration;

use crate::cluster::TestCluster;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TabletAction {
    /// `migrate KS.TABLE TABLET REPLICA NODE SHARD`.
    Migrate {
        /// Keyspace.
        keyspace: String,
        /// Table.
        table: String,
        /// The tablet's index in token order.
        tablet: usize,
        /// Which of its replicas moves.
        replica: usize,
        /// The target node index.
        node: usize,
        /// The target shard.
        shard: u16,
    },
    /// `split KS.TABLE`.
    Split {
        /// Keyspace.
        keyspace: String,
        /// Table.
        table: String,
    },
    /// `leader KS.TABLE TABLET REPLICA`: a leader change on a strongly
    /// consistent table.
    Leader {
        /// Keyspace.
        keyspace: String,
        /// Table.
        table: String,
        /// The tablet's index in token order.
        tablet: usize,
        /// Which of its replicas becomes the leader.
        replica: usize,
    },
}

impl fmt::Display for TabletAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TabletAction::Migrate {
                keyspace,
                table,
                tablet,
                replica,
                node,
                shard,
            } => write!(
                f,
                "migrate {keyspace}.{table} tablet {tablet} replica {replica} to node {node} shard {shard}"
            ),
            TabletAction::Split { keyspace, table } => write!(f, "split {keyspace}.{table}"),
            TabletAction::Leader {
                keyspace,
                table,
                tablet,
                replica,
            } => write!(
                f,
                "leader of {keyspace}.{table} tablet {tablet} to replica {replica}"
            ),
        }
    }
}

/// A parsed script: steps in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TabletScript {
    /// (time after start, action), sorted by time.
    pub steps: Vec<(Duration, TabletAction)>,
}

fn table_name(s: Option<&str>, line: usize) -> Result<(String, String), String> {
    let s = s.ok_or_else(|| format!("line {line}: missing KS.TABLE"))?;
    let (ks, t) = s
        .split_once('.')
        .filter(|(k, t)| !k.is_empty() && !t.is_empty())
        .ok_or_else(|| format!("line {line}: '{s}' is not KS.TABLE"))?;
    Ok((ks.to_owned(), t.to_owned()))
}

fn number<T: std::str::FromStr>(s: Option<&str>, what: &str, line: usize) -> Result<T, String> {
    let s = s.ok_or_else(|| format!("line {line}: missing {what}"))?;
    s.parse()
        .map_err(|_| format!("line {line}: {what} '{s}' is not a valid number"))
}

impl TabletScript {
    /// Parses a script (see the module docs); errors name the line.
    pub fn parse(text: &str) -> Result<TabletScript, String> {
        let mut steps = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let mut words = content.split_whitespace();
            let secs: f64 = number(words.next(), "time (seconds)", line)?;
            let at = Duration::try_from_secs_f64(secs)
                .map_err(|_| format!("line {line}: time {secs} is not a valid duration"))?;
            let action = match words.next() {
                Some("migrate") => {
                    let (keyspace, table) = table_name(words.next(), line)?;
                    TabletAction::Migrate {
                        keyspace,
                        table,
                        tablet: number(words.next(), "tablet", line)?,
                        replica: number(words.next(), "replica", line)?,
                        node: number(words.next(), "node", line)?,
                        shard: number(words.next(), "shard", line)?,
                    }
                }
                Some("split") => {
                    let (keyspace, table) = table_name(words.next(), line)?;
                    TabletAction::Split { keyspace, table }
                }
                Some("leader") => {
                    let (keyspace, table) = table_name(words.next(), line)?;
                    TabletAction::Leader {
                        keyspace,
                        table,
                        tablet: number(words.next(), "tablet", line)?,
                        replica: number(words.next(), "replica", line)?,
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "line {line}: unknown action '{other}' (migrate, split or leader)"
                    ))
                }
                None => return Err(format!("line {line}: missing action")),
            };
            if let Some(extra) = words.next() {
                return Err(format!("line {line}: unexpected '{extra}'"));
            }
            steps.push((at, action));
        }
        steps.sort_by_key(|(at, _)| *at);
        Ok(TabletScript { steps })
    }

    /// Applies the steps at their times (measured from the call), printing
    /// each outcome; a refused step is reported and the script goes on.
    pub async fn run(&self, cluster: &TestCluster) {
        let start = tokio::time::Instant::now();
        for (at, action) in &self.steps {
            tokio::time::sleep_until(start + *at).await;
            let r = match action {
                TabletAction::Migrate {
                    keyspace,
                    table,
                    tablet,
                    replica,
                    node,
                    shard,
                } => cluster.migrate_tablet(keyspace, table, *tablet, *replica, (*node, *shard)),
                TabletAction::Split { keyspace, table } => cluster.split_tablets(keyspace, table),
                TabletAction::Leader {
                    keyspace,
                    table,
                    tablet,
                    replica,
                } => cluster.set_tablet_leader(keyspace, table, *tablet, *replica),
            };
            match r {
                Ok(()) => println!("tablet script at {:.1}s: {action}", at.as_secs_f64()),
                Err(e) => println!(
                    "tablet script at {:.1}s: {action} refused: {e}",
                    at.as_secs_f64()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_steps_in_time_order() {
        let s = TabletScript::parse(
            "# a comment\n\n10 split ks.t\n2.5 migrate ks.t 3 0 1 2  # move\n12 leader ks.t 1 2\n",
        )
        .unwrap();
        assert_eq!(
            s.steps,
            vec![
                (
                    Duration::from_millis(2500),
                    TabletAction::Migrate {
                        keyspace: "ks".into(),
                        table: "t".into(),
                        tablet: 3,
                        replica: 0,
                        node: 1,
                        shard: 2
                    }
                ),
                (
                    Duration::from_secs(10),
                    TabletAction::Split {
                        keyspace: "ks".into(),
                        table: "t".into()
                    }
                ),
                (
                    Duration::from_secs(12),
                    TabletAction::Leader {
                        keyspace: "ks".into(),
                        table: "t".into(),
                        tablet: 1,
                        replica: 2
                    }
                ),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        for (text, want) in [
            ("1 split kst", "line 1: 'kst' is not KS.TABLE"),
            ("\nx split ks.t", "line 2: time (seconds) 'x'"),
            ("1 move ks.t", "line 1: unknown action 'move'"),
            ("1 migrate ks.t 1 0 1", "line 1: missing shard"),
            ("1 split ks.t now", "line 1: unexpected 'now'"),
            ("1 leader ks.t 1", "line 1: missing replica"),
            ("-1 split ks.t", "line 1: time -1"),
            ("1", "line 1: missing action"),
        ] {
            let e = TabletScript::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
