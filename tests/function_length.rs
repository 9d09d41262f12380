//! No function in `src/` (outside tests) is longer than [`MAX_LINES`] lines unless a
//! `// Long: <why>` comment in it or right above it says why: a function that does
//! one thing fits on a screen or two. Functions are found by parsing the sources
//! (`syn`), so strings and comments cannot fool the count.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// About 150 lines (the house rule).
const MAX_LINES: usize = 150;

struct Finder<'a> {
    lines: &'a [&'a str],
    file: String,
    long: Vec<String>,
}

impl Finder<'_> {
    fn check(&mut self, name: &str, attrs: &[syn::Attribute], span: proc_macro2::Span) {
        if is_test(attrs) {
            return;
        }
        let (start, end) = (span.start().line, span.end().line);
        let n = end + 1 - start;
        if n <= MAX_LINES {
            return;
        }
        // `// Long:` within the function, or in the few lines above it.
        let from = start.saturating_sub(6).max(1);
        let explained = self.lines[from - 1..end.min(self.lines.len())]
            .iter()
            .any(|l| l.trim_start().starts_with("// Long:"));
        if !explained {
            self.long
                .push(format!("{}:{start} `{name}`: {n} lines", self.file));
        }
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
    })
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        use syn::spanned::Spanned;
        self.check(&f.sig.ident.to_string(), &f.attrs, f.span());
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        use syn::spanned::Spanned;
        self.check(&f.sig.ident.to_string(), &f.attrs, f.span());
        syn::visit::visit_impl_item_fn(self, f);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().unwrap() != "tests" {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_name().unwrap().to_string_lossy();
            if name != "tests.rs" && !name.ends_with("_tests.rs") {
                out.push(p);
            }
        }
    }
}

/// The functions of one source text that are too long without a reason.
fn long_functions(file: &str, text: &str) -> Vec<String> {
    let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut f = Finder {
        lines: &lines,
        file: file.to_string(),
        long: Vec::new(),
    };
    f.visit_file(&ast);
    f.long
}

#[test]
fn no_function_is_longer_than_the_rule_without_saying_why() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut long = Vec::new();
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.strip_prefix(&src).unwrap().display().to_string();
        long.extend(long_functions(&name, &text));
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines without a `// Long:` comment saying why:\n{}",
        long.join("\n")
    );
}

/// The check sees a long function, skips tests, and takes a reason.
#[test]
fn the_check_measures_what_it_should() {
    let body = "    let x = \"{\";\n".repeat(MAX_LINES);
    let long = format!("fn big() {{\n{body}}}\n");
    assert_eq!(long_functions("a.rs", &long).len(), 1);
    let explained = format!("// Long: one table of cases.\nfn big() {{\n{body}}}\n");
    assert!(long_functions("a.rs", &explained).is_empty());
    let test = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert!(long_functions("a.rs", &test).is_empty());
    let short = "fn small() { let s = \"}}}}\"; }\n";
    assert!(long_functions("a.rs", short).is_empty());
}
