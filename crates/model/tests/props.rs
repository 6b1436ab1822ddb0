//! Property tests of model's parsers (issue 19): `--sizes` and the tune
//! search mode. Arbitrary text never panics, errors are one line naming the
//! option or value, and sizes written as people write them parse back.

use proptest::prelude::*;
use topocomm_model::choice::parse_sizes;
use topocomm_model::tune::SearchMode;

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::one_line_naming;

const WORDS: &[&str] = &[
    "0",
    "1",
    "4",
    "64",
    "K",
    "k",
    "M",
    "G",
    "KiB",
    "B",
    "iB",
    "x",
    " ",
    ",",
    ",",
    "-",
    ".",
    "99999999999999999999",
    "1073741824",
    "1073741825",
    "\u{e9}",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sizes_never_panic(parts in prop::collection::vec(prop::sample::select(WORDS), 0..12)) {
        let text = parts.concat();
        match parse_sizes(&text) {
            Ok(v) => {
                prop_assert!(!v.is_empty());
                prop_assert!(v.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(v.iter().all(|&s| (1..=1 << 30).contains(&s)));
            }
            Err(e) => one_line_naming(&e.to_string(), "--sizes"),
        }
    }

    /// Sizes written with units read back sorted and deduplicated.
    #[test]
    fn sizes_round_trip(v in prop::collection::vec((1u64..1024, 0usize..3), 1..10)) {
        let units = [("", 1u64), ("K", 1 << 10), ("M", 1 << 20)];
        let text = v.iter().map(|&(n, u)| format!("{n}{}", units[u].0)).collect::<Vec<_>>().join(",");
        let mut want: Vec<u64> = v.iter().map(|&(n, u)| n * units[u].1).collect();
        want.sort_unstable();
        want.dedup();
        prop_assert_eq!(parse_sizes(&text).unwrap(), want);
    }

    #[test]
    fn modes(text in "[a-z ]{0,8}") {
        match text.parse::<SearchMode>() {
            Ok(m) => prop_assert_eq!(serde_json::to_value(m).unwrap(), serde_json::json!(text)),
            Err(e) => one_line_naming(&e, &format!("'{text}'")),
        }
    }
}
