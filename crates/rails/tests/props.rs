//! Property tests of the rails table reader (issue 19): arbitrary text never
//! panics, errors are one line naming the file, a written table reads back,
//! and mutated valid tables give Ok or an error.

use proptest::prelude::*;
use std::collections::BTreeMap;
use topocomm_rails::{ClassRates, RailTable, TABLE_SCHEMA};

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::one_line_naming;

const GOOD: &str = r#"{ "schema": "topocomm.rails-table/1", "note": "measured",
  "rails": { "mlx5_0": { "local": 11.8, "package": 9.2, "remote": 9.1 },
             "mlx5_1": { "local": 12 } } }"#;

fn rates() -> impl Strategy<Value = ClassRates> {
    // Binary fractions print and read back exactly.
    let gbs = (1u32..100_000).prop_map(|v| f64::from(v) / 64.0);
    (
        gbs.clone(),
        prop::option::of(gbs.clone()),
        prop::option::of(gbs),
    )
        .prop_map(|(local, package, remote)| ClassRates {
            local,
            package,
            remote,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tables_never_panic(text in "\\PC{0,80}") {
        if let Err(e) = RailTable::parse("t.json", &text) {
            one_line_naming(&e.to_string(), "t.json");
        }
    }

    /// One value of a valid table replaced, a byte range cut out, or the
    /// text truncated; names and strings may hold JSON escapes (`\n`).
    #[test]
    fn tables_mutated(op in 0u8..3, at: usize, with in "(-1|0|1e999|null|\"x\\\\ny\"|\\[\\]|\\{\\}|\"|,|\"\\\\u0000\")") {
        let mut at = at % (GOOD.len() + 1);
        while !GOOD.is_char_boundary(at) {
            at -= 1;
        }
        let text = match op {
            0 => GOOD[..at].to_string(),
            1 => format!("{}{}{}", &GOOD[..at], with, &GOOD[(at + 4).min(GOOD.len())..]),
            _ => {
                let starts: Vec<usize> = GOOD.match_indices(": ").map(|(i, _)| i + 2).collect();
                let s = starts[at % starts.len()];
                let len = GOOD[s..].find([',', '}']).unwrap_or(0);
                format!("{}{}{}", &GOOD[..s], with, &GOOD[s + len..])
            }
        };
        match RailTable::parse("rails.json", &text) {
            Ok(t) => prop_assert!(t.rails.values().all(|r| r.local.is_finite() && r.local > 0.0)),
            Err(e) => one_line_naming(&e.to_string(), "rails.json"),
        }
    }

    /// Rail names, including ones with JSON escapes, in errors stay on one line.
    #[test]
    fn bad_rail_names(name in "[a-z0-9_\\n\\t\"\\\\]{1,8}", bad in "(-1|0|\"x\")") {
        let doc = serde_json::json!({
            "schema": TABLE_SCHEMA,
            "rails": { name.clone(): { "local": 1.0 }, "z": { "local": serde_json::from_str::<serde_json::Value>(&bad).unwrap() } }
        });
        if let Err(e) = RailTable::parse("n.json", &doc.to_string()) {
            one_line_naming(&e.to_string(), "n.json");
        }
        let doc = serde_json::json!({ "schema": name, "rails": { "a": { "local": 1.0 } } });
        if let Err(e) = RailTable::parse("s.json", &doc.to_string()) {
            one_line_naming(&e.to_string(), "s.json");
        }
    }

    /// A table written by serde reads back equal.
    #[test]
    fn tables_round_trip(rails in prop::collection::btree_map("[a-z][a-z0-9_]{0,8}", rates(), 1..5)) {
        let doc = serde_json::json!({ "schema": TABLE_SCHEMA, "rails": rails });
        let t = RailTable::parse("r.json", &doc.to_string()).unwrap();
        let want: BTreeMap<String, ClassRates> = rails;
        prop_assert_eq!(t.rails, want);
    }
}
