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
