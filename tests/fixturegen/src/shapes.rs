//! What documents and updates look like: one [`Shape`] per kind of collection
//! (orders, customers, inventory, ...), with realistic small documents and the
//! update forms a 5.1+ server logs (`$v:2` diffs and whole-document replacements).
//!
//! Every shape keeps one invariant the update generators rely on: documents are only
//! changed in ways that keep later normal updates valid (an order's `items` array
//! never becomes empty, so `sitems: {a: true, u0: ...}` always has an element 0).

use rand::{Rng, RngCore};

use super::bsonw::BsonW;
use super::ids::Live;
use super::rng::{pick, DocRng};

/// The kinds of document the generator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Order,
    Customer,
    Inventory,
    Payment,
    Profile,
    SessionLog,
    Click,
    Event,
    PageView,
    Rollup,
    Funnel,
    /// Large documents (8-64 KB): a media library's assets (bench `--mix large`).
    Asset,
    /// Tiny documents (entries under 200 bytes): metric ticks (bench `--mix tiny`).
    Tick,
}

const FIRST: &[&str] = &[
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Margaret",
    "Ken",
    "Frances",
    "Niklaus",
    "Radia",
    "Dennis",
    "Hedy",
    "Tim",
    "Katherine",
    "Linus",
    "Sophie",
    "Bjarne",
    "Annie",
    "Guido",
    "Lea",
    "Yukihiro",
    "Mary",
    "John",
];
const LAST: &[&str] = &[
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Hamilton",
    "Thompson",
    "Allen",
    "Wirth",
    "Perlman",
    "Ritchie",
    "Lamarr",
    "Berners-Lee",
    "Johnson",
    "Torvalds",
    "Wilson",
    "Stroustrup",
    "Easley",
    "van Rossum",
    "Martin",
    "Matsumoto",
    "Keller",
    "McCarthy",
];
const CITIES: &[(&str, &str)] = &[
    ("Paris", "FR"),
    ("Lyon", "FR"),
    ("Berlin", "DE"),
    ("Hamburg", "DE"),
    ("Madrid", "ES"),
    ("Lisbon", "PT"),
    ("Milan", "IT"),
    ("Vienna", "AT"),
    ("Zurich", "CH"),
    ("Amsterdam", "NL"),
    ("Brussels", "BE"),
    ("Dublin", "IE"),
    ("Oslo", "NO"),
    ("Warsaw", "PL"),
    ("Prague", "CZ"),
    ("Helsinki", "FI"),
];
const PRODUCTS: &[&str] = &[
    "espresso cup",
    "tea kettle",
    "wool socks",
    "rain jacket",
    "desk lamp",
    "notebook",
    "fountain pen",
    "backpack",
    "water bottle",
    "headphones",
    "usb cable",
    "phone case",
    "yoga mat",
    "running shoes",
    "coffee beans",
    "chef knife",
    "cutting board",
    "scarf",
    "sunglasses",
    "umbrella",
];
const ORDER_STATUS: &[&str] = &["pending", "paid", "packed", "shipped", "delivered"];
const TIERS: &[&str] = &["bronze", "silver", "gold", "platinum"];
const WAREHOUSES: &[&str] = &["PAR-1", "PAR-2", "FRA-1", "MAD-1", "WAW-1"];
const METHODS: &[&str] = &["card", "card", "card", "paypal", "sepa", "apple_pay"];
const LANGS: &[&str] = &["en", "fr", "de", "es", "it", "pt", "nl", "pl"];
const THEMES: &[&str] = &["light", "dark", "system"];
const UAS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) Mobile/15E148",
    "Mozilla/5.0 (Linux; Android 15) Chrome/131.0 Mobile",
    "shop-ios/4.12.0",
    "shop-android/4.11.3",
];
const PAGES: &[&str] = &[
    "/",
    "/c/kitchen",
    "/c/outdoor",
    "/c/office",
    "/cart",
    "/checkout",
    "/account",
    "/search",
];
const REFS: &[&str] = &["direct", "search", "newsletter", "social", "ads"];
const EVENTS: &[&str] = &[
    "cart.add",
    "cart.remove",
    "checkout.start",
    "checkout.done",
    "search",
    "wishlist.add",
    "login",
    "logout",
];
const METRICS: &[&str] = &["revenue", "orders", "visits", "signups", "refunds"];
const FUNNELS: &[&str] = &["checkout", "signup", "onboarding"];

fn ms(rng: &mut DocRng, secs: u32) -> i64 {
    secs as i64 * 1000 + rng.random_range(0..1000)
}

fn money(rng: &mut DocRng, lo: u32, hi: u32) -> f64 {
    rng.random_range(lo * 100..hi * 100) as f64 / 100.0
}

fn day(secs: u32) -> String {
    chrono::DateTime::from_timestamp(secs as i64, 0)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn item(w: &mut BsonW, rng: &mut DocRng) -> f64 {
    let sku = rng.random_range(10_000..10_400);
    let qty = rng.random_range(1..4);
    let price = money(rng, 3, 120);
    w.doc("");
    w.str_fmt("sku", format_args!("SKU-{sku}"));
    w.str("name", pick(rng, PRODUCTS));
    w.i32("qty", qty);
    w.f64("price", price);
    w.end();
    price * qty as f64
}

impl Shape {
    /// Writes the fields of the document `l` (starting with `_id`) into the open
    /// document. The content is a function of `(seed, l.src, l.id, l.born)` only.
    pub fn write_fields(self, w: &mut BsonW, seed: u64, l: Live) {
        let mut r = DocRng::for_doc(seed, l.src as usize, l.id.hash());
        let r = &mut r;
        l.id.write(w, "_id");
        match self {
            Shape::Order => {
                w.str_fmt(
                    "orderNo",
                    format_args!("SO-{}-{:05}", l.born / 86_400, r.random_range(0..100_000)),
                );
                w.str_fmt(
                    "customerId",
                    format_args!("C-{:06}", r.random_range(1..5000)),
                );
                w.str("status", pick(r, &ORDER_STATUS[..2]));
                w.arr("items");
                let n = r.random_range(1..4);
                let mut total = 0.0;
                for _ in 0..n {
                    total += item(w, r);
                }
                w.end();
                w.f64("total", (total * 100.0).round() / 100.0);
                w.str("currency", "EUR");
                let (city, country) = pick(r, CITIES);
                w.doc("shipTo");
                w.str("city", city);
                w.str("country", country);
                w.end();
                w.date("createdAt", ms(r, l.born));
            }
            Shape::Customer => {
                let (f, s) = (pick(r, FIRST), pick(r, LAST));
                w.str_fmt("name", format_args!("{f} {s}"));
                // Unique (the collection has a unique index on it): derived from the id.
                w.str_fmt(
                    "email",
                    format_args!(
                        "{}.{}.{:x}@example.com",
                        f.to_lowercase(),
                        s.to_lowercase().replace(' ', ""),
                        l.id.hash() >> 24
                    ),
                );
                w.str("tier", pick(r, TIERS));
                w.str("country", pick(r, CITIES).1);
                if r.random_bool(0.3) {
                    w.str_fmt("coupon", format_args!("WELCOME{}", r.random_range(5..30)));
                }
                w.date("createdAt", ms(r, l.born));
            }
            Shape::Inventory => {
                let sku = match l.id {
                    super::ids::Id::Int(n) => n,
                    _ => r.random_range(10_000..20_000),
                };
                w.str_fmt("sku", format_args!("SKU-{sku}"));
                w.str("name", pick(r, PRODUCTS));
                w.i32("qty", r.random_range(0..500));
                w.str("warehouse", pick(r, WAREHOUSES));
                w.date("updatedAt", ms(r, l.born));
            }
            Shape::Payment => {
                let mut order = [0u8; 12];
                r.fill_bytes(&mut order);
                order[0..4]
                    .copy_from_slice(&l.born.saturating_sub(r.random_range(0..600)).to_be_bytes());
                w.oid("orderId", &order);
                w.f64("amount", money(r, 5, 400));
                w.str("currency", "EUR");
                w.str("method", pick(r, METHODS));
                w.str("status", "captured");
                w.date("createdAt", ms(r, l.born));
            }
            Shape::Profile => {
                let (f, s) = (pick(r, FIRST), pick(r, LAST));
                w.str_fmt("displayName", format_args!("{f} {}.", &s[..1]));
                w.str_fmt(
                    "bio",
                    format_args!("Likes {} and {}.", pick(r, PRODUCTS), pick(r, PRODUCTS)),
                );
                w.doc("prefs");
                w.str("lang", pick(r, LANGS));
                w.bool("newsletter", r.random_bool(0.4));
                w.str("theme", pick(r, THEMES));
                w.end();
                w.str_fmt(
                    "avatarUrl",
                    format_args!("https://cdn.example.com/a/{:08x}.png", r.random::<u32>()),
                );
                w.date("updatedAt", ms(r, l.born));
            }
            Shape::SessionLog => {
                w.str_fmt("userId", format_args!("u_{:06}", r.random_range(1..9000)));
                w.str_fmt(
                    "ip",
                    format_args!(
                        "10.{}.{}.{}",
                        r.random_range(0..32),
                        r.random_range(0..256),
                        r.random_range(1..255)
                    ),
                );
                w.str("ua", pick(r, UAS));
                w.date("createdAt", ms(r, l.born));
            }
            Shape::Click => {
                if r.random_bool(0.5) {
                    w.str_fmt(
                        "page",
                        format_args!("/p/SKU-{}", r.random_range(10_000..10_400)),
                    );
                } else {
                    w.str("page", pick(r, PAGES));
                }
                w.str_fmt("userId", format_args!("u_{:06}", r.random_range(1..9000)));
                w.str("ref", pick(r, REFS));
                w.date("at", ms(r, l.born));
            }
            Shape::Event => {
                w.str("type", pick(r, EVENTS));
                w.str_fmt("userId", format_args!("u_{:06}", r.random_range(1..9000)));
                w.str_fmt(
                    "sku",
                    format_args!("SKU-{}", r.random_range(10_000..10_400)),
                );
                w.date("at", ms(r, l.born));
            }
            Shape::PageView => {
                w.str("path", pick(r, PAGES));
                w.str("day", &day(l.born));
                w.i32("views", r.random_range(1..5000));
                w.i32("uniques", r.random_range(1..900));
            }
            Shape::Rollup => {
                w.str("metric", pick(r, METRICS));
                w.str("day", &day(l.born));
                w.f64("value", money(r, 10, 90_000));
            }
            Shape::Funnel => {
                w.str("funnel", pick(r, FUNNELS));
                w.i32("step", r.random_range(1..6));
                w.i32("users", r.random_range(10..4000));
                w.date("at", ms(r, l.born));
            }
            Shape::Asset => super::mix::write_asset(w, r, l),
            Shape::Tick => {
                w.i32("v", r.random_range(0..10_000));
                w.date("at", ms(r, l.born));
            }
        }
    }

    /// Writes a complete top-level document (for the backup's collection files).
    pub fn write_doc(self, w: &mut BsonW, seed: u64, l: Live) {
        w.start();
        self.write_fields(w, seed, l);
        w.end();
    }

    /// True when normal traffic updates documents of this shape.
    pub fn updatable(self) -> bool {
        !matches!(
            self,
            Shape::SessionLog | Shape::Click | Shape::Event | Shape::Funnel
        )
    }

    /// Writes the `o` field of a normal (non-destructive) update of document `l`,
    /// as a 5.1+ primary logs it: a `$v: 2` diff (sections in the server's order,
    /// `d`, `u`, `i`, then `s<field>` sub-diffs: `doc_diff::DocumentSubDiffNode`),
    /// or now and then a whole-document replacement. `now_ms` is the time of the
    /// update. (Classic `$set` entries are what 4.4/5.0 primaries logged; servers
    /// from 6.1 refuse them in applyOps, so a modern oplog never holds them.)
    ///
    /// The random stream is drawn exactly as before diffs were the only form, so
    /// the traffic (and the documents counted) stays the same.
    pub fn write_update<R: Rng + ?Sized>(
        self,
        w: &mut BsonW,
        rng: &mut R,
        now_ms: i64,
        seed: u64,
        l: Live,
    ) {
        let form = rng.random_range(0..100);
        if form >= 95 && matches!(self, Shape::Order | Shape::Customer | Shape::Profile) {
            w.doc("o");
            self.write_fields(w, seed, l);
            w.end();
            return;
        }
        // Below 70 the old generator wrote diffs with extra shapes (array and insert
        // sections); above it, `$set`s of the same fields: both are diffs now.
        let rich = form < 70;
        w.doc("o");
        w.i32("$v", 2);
        w.doc("diff");
        match self {
            Shape::Order => {
                let k = rng.random_range(0..3);
                if rich && k == 2 {
                    w.doc("sitems");
                    w.bool("a", true);
                    w.doc("u0");
                    w.str_fmt(
                        "sku",
                        format_args!("SKU-{}", rng.random_range(10_000..10_400)),
                    );
                    w.str("name", pick(rng, PRODUCTS));
                    w.i32("qty", rng.random_range(1..4));
                    w.f64("price", rng.random_range(300..12_000) as f64 / 100.0);
                    w.end();
                    w.end();
                } else if rich && k == 1 {
                    w.doc("u");
                    w.str("status", "paid");
                    w.end();
                    w.doc("i");
                    w.date("paidAt", now_ms);
                    w.end();
                } else {
                    w.doc("u");
                    w.str("status", pick(rng, &ORDER_STATUS[1..]));
                    w.date("updatedAt", now_ms);
                    w.end();
                }
            }
            Shape::Customer => {
                if rich && rng.random_bool(0.5) {
                    w.doc("u");
                    w.str("tier", pick(rng, TIERS));
                    w.end();
                } else if rich {
                    w.doc("i");
                    w.date("lastLoginAt", now_ms);
                    w.end();
                } else {
                    w.doc("u");
                    w.str("tier", pick(rng, TIERS));
                    w.end();
                }
            }
            Shape::Inventory => {
                w.doc("u");
                w.i32("qty", rng.random_range(0..500));
                w.date("updatedAt", now_ms);
                w.end();
            }
            Shape::Payment => {
                w.doc("u");
                w.str(
                    "status",
                    if rng.random_bool(0.8) {
                        "settled"
                    } else {
                        "refunded"
                    },
                );
                w.end();
            }
            Shape::Profile => {
                // `u` before the `sprefs` sub-diff: the server's section order.
                let (field, value) = if rich {
                    ("lang", pick(rng, LANGS))
                } else {
                    ("theme", pick(rng, THEMES))
                };
                w.doc("u");
                w.date("updatedAt", now_ms);
                w.end();
                w.doc("sprefs");
                w.doc("u");
                w.str(field, value);
                w.end();
                w.end();
            }
            Shape::PageView => {
                w.doc("u");
                w.i32("views", rng.random_range(1..9000));
                w.i32("uniques", rng.random_range(1..1500));
                w.end();
            }
            Shape::Rollup => {
                w.doc("u");
                w.f64("value", rng.random_range(1_000..9_000_000) as f64 / 100.0);
                w.end();
            }
            Shape::SessionLog | Shape::Click | Shape::Event | Shape::Funnel => {
                w.doc("u");
                w.date("touchedAt", now_ms);
                w.end();
            }
            Shape::Asset => {
                w.doc("u");
                w.i32("views", rng.random_range(1..90_000));
                w.date("updatedAt", now_ms);
                w.end();
            }
            Shape::Tick => {
                w.doc("u");
                w.i32("v", rng.random_range(0..10_000));
                w.end();
            }
        }
        w.end();
        w.end();
    }

    /// Writes the `o` of an occasional update that removes a minor field (realistic,
    /// and rare enough never to look like a wiping burst).
    pub fn write_minor_unset<R: Rng + ?Sized>(self, w: &mut BsonW, rng: &mut R) {
        let field = match self {
            Shape::Customer => "coupon",
            Shape::Profile => "avatarUrl",
            Shape::Order => "shipTo",
            _ => "note",
        };
        // The draw that once chose between a diff and a classic `$unset` is kept, so
        // the random stream (and the traffic) stays the same: both are diffs now.
        let _ = rng.random_bool(0.5);
        w.doc("o");
        w.i32("$v", 2);
        w.doc("diff");
        w.doc("d");
        w.bool(field, false);
        w.end();
        w.end();
        w.end();
    }
}

/// Which form a wiping update of a profile takes (the `wipingUpdate` incident).
#[derive(Clone, Copy, Debug)]
pub enum Wipe {
    /// A replacement that leaves only `{_id}`.
    ReplaceWithId,
    /// What a user's `$unset` of the profile's content logs on a 5.1+ server: a
    /// `$v:2` diff deleting those fields.
    Unset,
    /// A `$v:2` diff with a `d` section.
    DiffDelete,
}

/// Writes the `o` of a wiping update of profile `l`.
pub fn write_wipe(w: &mut BsonW, kind: Wipe, l: Live) {
    w.doc("o");
    match kind {
        Wipe::ReplaceWithId => l.id.write(w, "_id"),
        Wipe::Unset => {
            w.i32("$v", 2);
            w.doc("diff");
            w.doc("d");
            for f in ["bio", "prefs", "avatarUrl"] {
                w.bool(f, false);
            }
            w.end();
            w.end();
        }
        Wipe::DiffDelete => {
            w.i32("$v", 2);
            w.doc("diff");
            w.doc("d");
            for f in ["displayName", "bio", "prefs", "avatarUrl"] {
                w.bool(f, false);
            }
            w.end();
            w.end();
        }
    }
    w.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Id;
    use crate::rng::MainRng;
    use rand::SeedableRng;

    const ALL: [Shape; 11] = [
        Shape::Order,
        Shape::Customer,
        Shape::Inventory,
        Shape::Payment,
        Shape::Profile,
        Shape::SessionLog,
        Shape::Click,
        Shape::Event,
        Shape::PageView,
        Shape::Rollup,
        Shape::Funnel,
    ];

    #[test]
    fn documents_are_valid_deterministic_and_small() {
        let l = Live {
            id: Id::Oid([7; 12]),
            born: 1_795_000_000,
            src: 3,
        };
        for s in ALL {
            let mut a = BsonW::new();
            s.write_doc(&mut a, 1, l);
            let mut b = BsonW::new();
            s.write_doc(&mut b, 1, l);
            assert_eq!(a.buf, b.buf, "{s:?}");
            let d = bson::Document::from_reader(&a.buf[..]).unwrap();
            assert_eq!(d.keys().next().map(String::as_str), Some("_id"));
            assert!(a.buf.len() < 500, "{s:?}: {} bytes", a.buf.len());
        }
    }

    /// `document_diff_serialization.cpp`: sections `d`, `u`, `i`, `b` in this order,
    /// each at most once, then only `s<field>` sub-diffs (errors 4770503, 4770514).
    fn assert_server_section_order(s: Shape, diff: &bson::Document) {
        let rank = |k: &str| match k.as_bytes()[0] {
            b'd' => 0,
            b'u' => 1,
            b'i' => 2,
            b'b' => 3,
            b's' => 4,
            _ => panic!("{s:?}: unknown diff section `{k}` in {diff}"),
        };
        let ranks: Vec<u8> = diff.keys().map(|k| rank(k)).collect();
        assert!(
            ranks
                .windows(2)
                .all(|w| w[0] < w[1] || (w[0] == 4 && w[1] == 4)),
            "{s:?}: {diff}"
        );
    }

    #[test]
    fn updates_are_valid_in_every_form() {
        let mut rng = MainRng::seed_from_u64(9);
        let l = Live {
            id: Id::Int(10_001),
            born: 1_795_000_000,
            src: 2,
        };
        for s in ALL {
            for _ in 0..50 {
                let mut w = BsonW::new();
                w.start();
                s.write_update(&mut w, &mut rng, 1_795_000_001_000, 1, l);
                w.end();
                let d = bson::Document::from_reader(&w.buf[..]).unwrap();
                let o = d.get_document("o").unwrap();
                assert!(!o.is_empty());
                if let Ok(diff) = o.get_document("diff") {
                    assert!(
                        !diff.contains_key("d"),
                        "normal updates never delete fields"
                    );
                    assert_eq!(o.get_i32("$v").unwrap(), 2);
                    assert_server_section_order(s, diff);
                } else {
                    // A replacement: it carries the document's _id.
                    assert!(o.contains_key("_id"), "{s:?}: {o}");
                }
                assert!(!o
                    .keys()
                    .any(|k| k.starts_with("$set") || k.starts_with("$unset")));
            }
        }
        let mut w = BsonW::new();
        w.start();
        write_wipe(&mut w, Wipe::ReplaceWithId, l);
        w.end();
        let d = bson::Document::from_reader(&w.buf[..]).unwrap();
        assert_eq!(d.get_document("o").unwrap().len(), 1);
    }
}
