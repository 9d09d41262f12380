//! Plain-text tables for terminal output: left-aligned columns two spaces apart,
//! the last column unpadded, widths measured in characters.

/// Column widths fitted to a header and its rows.
pub struct Columns {
    widths: Vec<usize>,
}

impl Columns {
    pub fn fit(header: &[&str], rows: &[Vec<String>]) -> Columns {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        Columns { widths }
    }

    /// One line of cells, without trailing spaces.
    pub fn line<S: AsRef<str>>(&self, cells: &[S]) -> String {
        let last = cells.len().saturating_sub(1);
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let c = c.as_ref();
                match self.widths.get(i) {
                    Some(w) if i < last => format!("{c:<w$}"),
                    _ => c.to_string(),
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    }
}

impl Columns {
    /// [`Columns::line`], with the last cell wrapped at spaces so that no line is
    /// wider than `width` (its continuation lines start under it). Nothing is cut:
    /// a word longer than the room left stays whole.
    pub fn lines_within<S: AsRef<str>>(&self, cells: &[S], width: usize) -> Vec<String> {
        let one = self.line(cells);
        let Some(last) = cells.last() else {
            return vec![one];
        };
        if one.chars().count() <= width || cells.len() < 2 {
            return vec![one];
        }
        // Where the last column starts; too far right for a readable column, the
        // last cell goes on lines of its own below the row, indented.
        let mut start: usize = self.widths[..cells.len() - 1].iter().map(|w| w + 2).sum();
        let below = start + 20 > width;
        if below {
            start = 4;
        }
        let room = width.saturating_sub(start).max(20);
        let mut lines: Vec<String> = Vec::new();
        let mut cur = String::new();
        for word in last.as_ref().split(' ') {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > room {
                lines.push(std::mem::take(&mut cur));
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        lines.push(cur);
        let mut head: Vec<&str> = cells[..cells.len() - 1].iter().map(AsRef::as_ref).collect();
        let rest = if below {
            &lines[..]
        } else {
            head.push(&lines[0]);
            &lines[1..]
        };
        let mut out = vec![self.line(&head)];
        out.extend(rest.iter().map(|l| format!("{}{l}", " ".repeat(start))));
        out
    }
}

/// The terminal's width when stdout is one (tables are wrapped to it), else None (a
/// file or a pipe gets whole lines).
pub fn stdout_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size().map(|(terminal_size::Width(w), _)| (w as usize).max(40))
}

/// Columns for one-line summaries: the width of the terminal (stdout, else
/// stderr), else `COLUMNS`, else 200 (a file or a pipe: a log line may be long).
pub fn width() -> usize {
    let tty = terminal_size::terminal_size()
        .or_else(|| terminal_size::terminal_size_of(std::io::stderr()));
    if let Some((terminal_size::Width(w), _)) = tty {
        return (w as usize).max(40);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|&w| w >= 40)
        .unwrap_or(200)
}

/// `1 entry`, `2 entries`: a count with its noun in the right number.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The whole table, each line starting with `indent` and ending with a newline.
pub fn render(indent: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = Columns::fit(header, rows);
    let mut out = format!("{indent}{}\n", cols.line(header));
    for r in rows {
        out.push_str(&format!("{indent}{}\n", cols.line(r)));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_column_wraps_under_itself_and_nothing_is_cut() {
        let rows = vec![vec![
            "a".to_string(),
            "one two three four five six seven eight nine ten eleven twelve thirteen".into(),
        ]];
        let c = super::Columns::fit(&["K", "DETAILS"], &rows);
        let lines = c.lines_within(&rows[0], 30);
        assert_eq!(lines[0], "a  one two three four five six");
        assert!(lines[1].starts_with("   seven"), "{lines:?}");
        assert_eq!(lines.join(" ").split_whitespace().count(), 14);
        assert_eq!(c.lines_within(&rows[0], 500).len(), 1);
        // A last column starting too far right goes below the row.
        let wide = vec![vec!["x".repeat(40), "one two three".to_string()]];
        let c = super::Columns::fit(&["K", "DETAILS"], &wide);
        assert_eq!(
            c.lines_within(&wide[0], 50),
            vec!["x".repeat(40), "    one two three".into()]
        );
    }

    #[test]
    fn aligns_columns_and_leaves_the_last_unpadded() {
        let rows = vec![
            vec!["shop.orders".to_string(), "113".into(), "ok".into()],
            vec!["a.b".into(), "7".into(), String::new()],
        ];
        assert_eq!(
            super::render("  ", &["NAMESPACE", "N", "NOTE"], &rows),
            "  NAMESPACE    N    NOTE\n  shop.orders  113  ok\n  a.b          7\n"
        );
    }
}
