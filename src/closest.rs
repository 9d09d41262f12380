//! What the user probably meant: the known names closest to one that matched
//! nothing (a mistyped `--ns`, a collection that is not there), for "did you mean"
//! hints. Pure and small: callers bring the names they saw.

/// At most `n` of `known` closest to `wanted`, best first, duplicates removed.
///
/// `wanted` may be a glob (`shop.order*`): its wildcard characters are ignored when
/// comparing. Closeness is, in order: a name containing the typed text (or the part
/// after the last `.`), then the case-insensitive edit distance (Levenshtein), then
/// the name itself, so the order is stable. Every name is a candidate: the closest
/// ones are listed even when none is close (the caller says "closest", not "did
/// you mean").
pub fn closest<'a>(
    wanted: &str,
    known: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let typed: String = wanted
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\'))
        .flat_map(char::to_lowercase)
        .collect();
    let tail = typed.rsplit('.').next().unwrap_or("").to_string();
    let mut scored: Vec<(bool, usize, &'a str)> = known
        .into_iter()
        .map(|k| {
            let lower = k.to_lowercase();
            let contains = (!typed.is_empty() && lower.contains(&typed))
                || (tail.len() >= 3 && lower.contains(&tail));
            (!contains, distance(&typed, &lower), k)
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.2 == b.2);
    scored.into_iter().take(n).map(|(_, _, k)| k).collect()
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

/// `; the closest: `a`, `b` or `c`` (up to three of `known`), or an empty string
/// when there is nothing to name: the tail of a "matches nothing" message.
pub fn closest_text<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let c = closest(wanted, known, 3);
    if c.is_empty() {
        String::new()
    } else {
        format!("; the closest: {}", listed(&c))
    }
}

/// `` `a`, `b` or `c` `` for a message.
pub fn listed(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("shop.order", "shop.orders"), 1);
        assert_eq!(
            closest_text("shop.ordrs", ["shop.orders", "a.b"]),
            "; the closest: `shop.orders` or `a.b`"
        );
        assert_eq!(closest_text("x", []), "");
    }

    #[test]
    fn typos_globs_and_parts() {
        let known = [
            "shop.orders",
            "shop.orders_archive",
            "shop.customers",
            "analytics.pageviews",
            "crm.leads",
        ];
        assert_eq!(
            closest("shop.order", known, 2),
            vec!["shop.orders", "shop.orders_archive"]
        );
        assert_eq!(closest("shop.ordrs", known, 1), vec!["shop.orders"]);
        assert_eq!(closest("Shop.Customer*", known, 1), vec!["shop.customers"]);
        // The collection part alone, in another database.
        assert_eq!(
            closest("sales.pageviews", known, 1),
            vec!["analytics.pageviews"]
        );
        assert_eq!(closest("x", known, 10).len(), 5);
        assert!(closest("x", [], 3).is_empty());
        assert_eq!(closest("a", ["b", "b"], 3), vec!["b"]);
    }

    #[test]
    fn listing() {
        assert_eq!(listed(&[]), "");
        assert_eq!(listed(&["a"]), "`a`");
        assert_eq!(listed(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
