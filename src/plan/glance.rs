//! The plan in one line: the backup window, the oplog's coverage, the incidents and
//! the limit, in time order, so that "is the limit where I think it is" takes one
//! look instead of reading four sections.
//!
//! ```text
//! Timeline  2026-11-21 UTC: oplog 01:00:03 · backup 01:00:00-01:00:07 · drop shop.orders 01:06:05 · LIMIT 01:06:05 (1795223165:1) · oplog end 01:28:42
//! ```
//!
//! Times are UTC wall-clock seconds of the oplog positions (`t`); the date is said
//! once (and again where it changes). Too long for the width, the incidents in the
//! middle are summed up ("… 3 more incidents …"), never the limit or the ends.

use chrono::{DateTime, Utc};

use crate::oplog::Ts;

use super::RestorePlan;

/// One mark on the line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mark {
    ts: Ts,
    text: String,
    /// Kept whatever the width.
    essential: bool,
}

fn when(ts: Ts) -> DateTime<Utc> {
    DateTime::from_timestamp(ts.t as i64, 0).unwrap_or_default()
}

/// What the line is made of, known once the oplog has been read (before anything is
/// applied, so `pitr replay` can show it first).
pub struct Points<'a> {
    pub oplog: Option<(Ts, Ts)>,
    pub backup_first: Option<Ts>,
    pub backup_end: Ts,
    pub incidents: &'a [super::stake::Incident],
    pub limit: Ts,
    /// `kind ns` of the incident the limit stops before, when it is one.
    pub before: Option<String>,
}

impl<'a> Points<'a> {
    pub fn of_plan(p: &'a RestorePlan) -> Points<'a> {
        Points {
            oplog: p.oplog.first_ts.zip(p.oplog.last_ts),
            backup_first: p.backup.oplog.as_ref().and_then(|o| o.first_ts),
            backup_end: p.backup.end_ts,
            incidents: &p.stake.incidents,
            limit: p.until.limit,
            before: p
                .until
                .finding
                .as_ref()
                .filter(|f| f.oplog_limit == p.until.limit)
                .map(|f| format!("{} {}", f.kind, f.ns)),
        }
    }
}

/// The timeline of `p`, at most `width` characters when it can be (the limit and
/// the ends are always shown).
pub fn line(p: &RestorePlan, width: usize) -> String {
    points_line(&Points::of_plan(p), width)
}

/// [`line`] from its points.
pub fn points_line(p: &Points<'_>, width: usize) -> String {
    let mut marks = Vec::new();
    if let Some((first, _)) = p.oplog {
        marks.push(Mark {
            ts: first,
            text: "oplog {}".into(),
            essential: true,
        });
    }
    match p.backup_first {
        Some(first) => marks.push(Mark {
            ts: first,
            text: format!("backup {{}}-{}", hms(p.backup_end)),
            essential: true,
        }),
        None => marks.push(Mark {
            ts: p.backup_end,
            text: "backup end {}".into(),
            essential: true,
        }),
    }
    for i in p.incidents {
        marks.push(Mark {
            ts: i.ts,
            text: format!("{} {} {{}}", i.kind, i.ns),
            essential: false,
        });
    }
    let limit = p.limit;
    let before = p
        .before
        .as_ref()
        .map(|b| format!(" before {b}"))
        .unwrap_or_default();
    marks.push(Mark {
        ts: limit,
        text: format!("LIMIT {{}} ({limit}, exclusive){before}"),
        essential: true,
    });
    if let Some((_, last)) = p.oplog {
        marks.push(Mark {
            ts: last,
            text: "oplog end {}".into(),
            essential: true,
        });
    }
    // Stable: at equal positions, the order above (the limit after incidents at it).
    marks.sort_by_key(|m| m.ts);
    render(&marks, width)
}

fn hms(ts: Ts) -> String {
    when(ts).format("%H:%M:%S").to_string()
}

fn render(marks: &[Mark], width: usize) -> String {
    let full = texts(marks);
    if full.chars().count() <= width {
        return full;
    }
    // Sum up the optional marks (the incidents), keeping the first and the last.
    let optional: Vec<usize> = (0..marks.len()).filter(|&i| !marks[i].essential).collect();
    for keep in (0..optional.len()).rev() {
        let dropped: Vec<usize> = if keep == 0 {
            optional.clone()
        } else {
            optional[keep.min(optional.len())..].to_vec()
        };
        let mut shown: Vec<Mark> = Vec::new();
        let mut summed = false;
        for (i, m) in marks.iter().enumerate() {
            if dropped.contains(&i) {
                if !summed {
                    shown.push(Mark {
                        ts: m.ts,
                        text: format!(
                            "… {} more incident{} …",
                            dropped.len(),
                            if dropped.len() == 1 { "" } else { "s" }
                        ),
                        essential: false,
                    });
                    summed = true;
                }
                continue;
            }
            shown.push(m.clone());
        }
        let s = texts(&shown);
        if s.chars().count() <= width || keep == 0 {
            return s;
        }
    }
    full
}

/// `Timeline  <date> UTC: a · b · c`, each mark's `{}` replaced by its time (and
/// the date said again where it changes).
fn texts(marks: &[Mark]) -> String {
    let Some(first) = marks.first() else {
        return "Timeline  (empty)".into();
    };
    let mut day = when(first.ts).date_naive();
    let mut parts = Vec::new();
    for m in marks {
        let w = when(m.ts);
        let mut t = hms(m.ts);
        if w.date_naive() != day {
            day = w.date_naive();
            t = format!("{} {t}", day.format("%Y-%m-%d"));
        }
        parts.push(m.text.replacen("{}", &t, 1));
    }
    format!(
        "Timeline  {} UTC: {}",
        when(first.ts).format("%Y-%m-%d"),
        parts.join(" · ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(t: u32, text: &str, essential: bool) -> Mark {
        Mark {
            ts: Ts::new(t, 1),
            text: text.into(),
            essential,
        }
    }

    #[test]
    fn fits_the_width_by_summing_up_incidents() {
        let d = 1_795_222_800; // 2026-11-21T01:00:00Z
        let marks = vec![
            mark(d, "oplog {}", true),
            mark(d + 100, "drop shop.orders {}", false),
            mark(d + 200, "drop shop.payments {}", false),
            mark(d + 300, "dropDatabase analytics {}", false),
            mark(d + 400, "LIMIT {}", true),
            mark(d + 90_000, "oplog end {}", true),
        ];
        let full = render(&marks, 500);
        assert_eq!(
            full,
            "Timeline  2026-11-21 UTC: oplog 01:00:00 · drop shop.orders 01:01:40 · drop shop.payments 01:03:20 · \
             dropDatabase analytics 01:05:00 · LIMIT 01:06:40 · oplog end 2026-11-22 02:00:00"
        );
        let short = render(&marks, 120);
        assert!(short.chars().count() <= 120, "{short}");
        assert!(
            short.contains("LIMIT 01:06:40") && short.contains("oplog end"),
            "{short}"
        );
        assert!(short.contains("more incident"), "{short}");
        // Narrower than the essentials: they are shown anyway.
        let tiny = render(&marks, 20);
        assert!(
            tiny.contains("LIMIT") && tiny.contains("… 3 more incidents …"),
            "{tiny}"
        );
    }
}
