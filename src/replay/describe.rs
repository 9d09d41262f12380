//! One description of a report, two renderings: the summary a person reads on the
//! terminal and the `report.md` kept for the post-mortem come from the same
//! [`Section`]s, so they cannot say different things (they were two hand-kept copies
//! of the same sections). `report.json` is the report's data itself (serde).
//!
//! A section is a key (`Engine`, `Replay`, ...), a first line, and items: lines,
//! tables, commands. On the terminal: the key in a 10-column margin, the first line
//! beside it, the items indented under it. In markdown: the key as a heading (or a
//! bold lead for the result), lines as a list, tables as tables, commands as a
//! shell block. [`Show`] keeps the details to the report.

/// Where a section appears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    /// The summary and the report.
    Both,
    /// Only the report (details for the post-mortem).
    Report,
    /// Only the summary (where the report is, say).
    Summary,
}

/// One section; see the module documentation.
#[derive(Clone, Debug)]
pub struct Section {
    /// The summary's margin (empty: the items start at the margin, as a table does).
    pub key: &'static str,
    /// The report's heading (defaults to the key).
    pub title: &'static str,
    pub head: String,
    pub items: Vec<Item>,
    pub show: Show,
}

impl Section {
    pub fn new(key: &'static str, head: impl Into<String>) -> Section {
        Section {
            key,
            title: key,
            head: head.into(),
            items: Vec::new(),
            show: Show::Both,
        }
    }

    pub fn titled(mut self, title: &'static str) -> Section {
        self.title = title;
        self
    }

    pub fn report_only(mut self) -> Section {
        self.show = Show::Report;
        self
    }

    pub fn summary_only(mut self) -> Section {
        self.show = Show::Summary;
        self
    }

    pub fn line(mut self, l: impl Into<String>) -> Section {
        self.items.push(Item::Line(l.into()));
        self
    }

    pub fn item(mut self, i: Item) -> Section {
        self.items.push(i);
        self
    }
}

/// What a section holds.
#[derive(Clone, Debug)]
pub enum Item {
    Line(String),
    Table(Table),
    /// `(what it does, the command)`, ready to paste.
    Commands(Vec<(String, String)>),
    /// Preformatted lines, kept as they are.
    Pre(Vec<String>),
}

/// A table: the summary aligns it (numbers to the right), the report draws it.
#[derive(Clone, Debug)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Columns aligned to the right on the terminal.
    pub right: Vec<bool>,
}

/// The summary: every section not kept to the report, in order.
pub fn text(sections: &[Section]) -> String {
    let mut s = String::new();
    for sec in sections.iter().filter(|x| x.show != Show::Report) {
        let indent = if sec.key.is_empty() { "" } else { "  " };
        if sec.key.is_empty() && !sec.head.is_empty() {
            // No margin: a line of its own (a banner, a sentence before a block).
            s.push_str(&format!("{}\n", sec.head));
        } else if !sec.key.is_empty() {
            s.push_str(format!("{:<10}{}", sec.key, sec.head).trim_end());
            s.push('\n');
        }
        for it in &sec.items {
            match it {
                Item::Line(l) => s.push_str(&format!("{indent}{l}\n")),
                Item::Pre(lines) => {
                    for l in lines {
                        s.push_str(&format!("{indent}{l}\n"));
                    }
                }
                Item::Commands(cmds) => {
                    for (what, cmd) in cmds {
                        s.push_str(&format!("{indent}# {what}\n{indent}{cmd}\n"));
                    }
                }
                Item::Table(t) => s.push_str(&aligned(indent, t)),
            }
        }
    }
    s
}

/// Columns two spaces apart, numbers to the right, the last column unpadded.
fn aligned(indent: &str, t: &Table) -> String {
    let cols = t.header.len();
    let width = |c: usize| {
        t.rows
            .iter()
            .map(|r| r.get(c).map_or(0, |x| x.chars().count()))
            .chain([t.header[c].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..cols).map(width).collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, x)| {
                let w = widths[c];
                if t.right.get(c).copied().unwrap_or(false) {
                    format!("{x:>w$}")
                } else if c + 1 == cols {
                    x.clone()
                } else {
                    format!("{x:<w$}")
                }
            })
            .collect();
        format!("{indent}{}\n", parts.join("  ").trim_end())
    };
    let mut s = line(&t.header);
    for r in &t.rows {
        s.push_str(&line(r));
    }
    s
}

/// The report: `# title`, the `Result` section's first line in bold at the top, then
/// every section under its heading.
pub fn markdown(title: &str, sections: &[Section]) -> String {
    let mut s = format!("# {title}\n\n");
    if let Some(r) = sections.iter().find(|x| x.key == "Result") {
        s.push_str(&format!("**Result: {}**\n\n", r.head));
    }
    for sec in sections
        .iter()
        .filter(|x| x.key != "Result" && x.show != Show::Summary)
    {
        if !sec.title.is_empty() {
            s.push_str(&format!("## {}\n\n", sec.title));
        }
        if !sec.head.is_empty() {
            s.push_str(&format!("{}\n\n", sec.head));
        }
        let mut after_list = false;
        for it in &sec.items {
            // A block right after a list item would be read as part of it.
            if after_list && !matches!(it, Item::Line(_)) {
                s.push('\n');
            }
            after_list = matches!(it, Item::Line(_));
            match it {
                Item::Line(l) => s.push_str(&format!("- {l}\n")),
                Item::Pre(lines) => {
                    s.push_str("```\n");
                    for l in lines {
                        s.push_str(l);
                        s.push('\n');
                    }
                    s.push_str("```\n");
                }
                Item::Commands(cmds) => {
                    s.push_str("```sh\n");
                    for (what, cmd) in cmds {
                        s.push_str(&format!("# {what}\n{cmd}\n"));
                    }
                    s.push_str("```\n");
                }
                Item::Table(t) => {
                    let cell = |x: &String| x.replace('|', "\\|").replace('\n', " ");
                    let row = |r: &[String]| {
                        format!(
                            "| {} |\n",
                            r.iter().map(cell).collect::<Vec<_>>().join(" | ")
                        )
                    };
                    s.push_str(&row(&t.header));
                    s.push_str(&format!("|{}\n", "---|".repeat(t.header.len())));
                    for r in &t.rows {
                        s.push_str(&row(r));
                    }
                }
            }
        }
        if !sec.items.is_empty() {
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections() -> Vec<Section> {
        vec![
            Section::new("Engine", "embedded"),
            Section::new("", "").item(Item::Table(Table {
                header: vec!["NAMESPACE".into(), "AT LIMIT".into()],
                rows: vec![vec!["shop.orders".into(), "113".into()]],
                right: vec![false, true],
            })),
            Section::new("Output", "in /r").item(Item::Commands(vec![(
                "all".into(),
                "mongorestore /r".into(),
            )])),
            Section::new("Engine", "1 operation applied")
                .titled("Engine statistics")
                .report_only(),
            Section::new("Result", "RESTORED (exit 0)"),
        ]
    }

    #[test]
    fn one_description_two_renderings() {
        assert_eq!(
            text(&sections()),
            "Engine    embedded\nNAMESPACE    AT LIMIT\nshop.orders       113\nOutput    in /r\n  # all\n  mongorestore /r\nResult    RESTORED (exit 0)\n"
        );
        let md = markdown("pitr replay", &sections());
        assert!(
            md.starts_with(
                "# pitr replay\n\n**Result: RESTORED (exit 0)**\n\n## Engine\n\nembedded\n\n"
            ),
            "{md}"
        );
        assert!(
            md.contains("| NAMESPACE | AT LIMIT |\n|---|---|\n| shop.orders | 113 |\n"),
            "{md}"
        );
        assert!(md.contains("```sh\n# all\nmongorestore /r\n```\n"), "{md}");
        assert!(
            md.contains("## Engine statistics\n\n1 operation applied"),
            "{md}"
        );
    }
}
