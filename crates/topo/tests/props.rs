//! Property tests of every topo parser of user input (issue 19): arbitrary
//! text never panics, errors are one line naming what they were given,
//! written forms parse back, and mutated valid files give Ok or an error.

use proptest::prelude::*;
use std::path::PathBuf;
use std::str::FromStr;
use topocomm_topo::testdata::fixture;
use topocomm_topo::{
    check_hwloc_xml, load, parse_pair, ClassMatrix, LocalityClass, PuSet, TopologySpec, TreeView,
};

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::one_line_naming;

/// A scratch file under the target folder, one per test case name.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("topo-props");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Synthetic descriptions of at most 4096 PUs (hwloc builds them in a few ms).
fn small_synthetic() -> impl Strategy<Value = (String, u64)> {
    let levels = ["pack", "numa", "l3", "l2", "core"];
    prop::collection::vec((0..levels.len(), 1u64..5), 0..4).prop_flat_map(move |picked| {
        let mut seen = Vec::new();
        let mut desc = Vec::new();
        let mut total = 1u64;
        for (i, n) in picked {
            // hwloc wants each type once and in top-down order.
            if seen.iter().any(|&s| s >= i) {
                continue;
            }
            seen.push(i);
            desc.push(format!("{}:{n}", levels[i]));
            total *= n;
        }
        (1u64..5).prop_map(move |pu| {
            let mut d = desc.clone();
            d.push(format!("pu:{pu}"));
            (d.join(" "), total * pu)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn puset_never_panics(text in "[0-9, \\-a-z]{0,40}") {
        match PuSet::parse_list(&text) {
            Ok(_) => {}
            Err(e) => assert!(!e.is_empty()),
        }
    }

    #[test]
    fn puset_errors_quote_the_item(text in "\\PC{0,30}") {
        if let Err(e) = PuSet::parse_list(&text) {
            assert!(!e.contains('\n'), "{e:?}");
            // The offending item is quoted.
            assert!(e.contains('\''), "{e}");
        }
    }

    #[test]
    fn puset_round_trips(set in prop::collection::btree_set(0u32..100_000, 0..64)) {
        let s = PuSet::from_indexes(set.iter().copied());
        let text = s.to_string();
        let back = PuSet::parse_list(&text).unwrap();
        prop_assert_eq!(back.indexes(), s.indexes());
        prop_assert_eq!(back.to_string(), text);
    }

    /// Any range, however wide, answers at once: a set or an error naming it.
    #[test]
    fn puset_wide_ranges(a: u32, b: u32) {
        let text = format!("{a}-{b}");
        let t = std::time::Instant::now();
        match PuSet::parse_list(&text) {
            Ok(s) => prop_assert_eq!(s.len() as u64, u64::from(b) - u64::from(a) + 1),
            Err(e) => assert!(e.contains(&text), "{e}"),
        }
        prop_assert!(t.elapsed().as_secs() < 2);
    }

    #[test]
    fn class_names_never_panic(text in "\\PC{0,20}") {
        match LocalityClass::from_str(&text) {
            Ok(c) => prop_assert_eq!(c.to_string(), text.trim()),
            Err(e) => one_line_naming(&e, text.trim()),
        }
    }

    #[test]
    fn class_names_round_trip(name in "(self|smt|l[1-5]|numa|die|package|machine|network|group[0-9]{1,3}|[a-k][a-z0-9_-]{0,8})") {
        let c: LocalityClass = name.parse().unwrap();
        prop_assert_eq!(c.to_string(), name.clone());
        prop_assert_eq!(c.name().parse::<LocalityClass>().unwrap(), c);
    }

    #[test]
    fn pairs_never_panic(text in "[0-9, \\-a]{0,16}") {
        match parse_pair(&text) {
            Ok((a, b)) => {
                let (x, y) = text.split_once(',').unwrap();
                prop_assert_eq!(x.trim().parse::<u32>().unwrap(), a);
                prop_assert_eq!(y.trim().parse::<u32>().unwrap(), b);
            }
            Err(e) => one_line_naming(&e.to_string(), &text),
        }
    }

    #[test]
    fn pairs_round_trip(a: u32, b: u32) {
        prop_assert_eq!(parse_pair(&format!("{a},{b}")).unwrap(), (a, b));
        prop_assert_eq!(parse_pair(&format!(" {a} , {b} ")).unwrap(), (a, b));
    }

    #[test]
    fn specs_never_panic_and_round_trip(text in "\\PC{0,30}") {
        let spec = TopologySpec::from_str(&text).unwrap();
        // What Display writes names the same source again.
        let again = TopologySpec::from_str(&spec.to_string()).unwrap();
        match (&spec, &again) {
            (TopologySpec::Synthetic(a), TopologySpec::Synthetic(b)) => prop_assert_eq!(a, b),
            _ => prop_assert_eq!(&spec, &again),
        }
    }

    #[test]
    fn xml_check_never_panics(text in "\\PC{0,80}") {
        if let Err(e) = check_hwloc_xml("some.xml", &text) {
            one_line_naming(&e.to_string(), "some.xml");
        }
    }

    #[test]
    fn xml_check_of_tag_soup(parts in prop::collection::vec(
        "(<topology version=\"[0-9.]{0,4}\">|</topology>|<object type=\"(Machine|PU|Core)\"[ a-z=\"0-9]{0,12}/?>|</object>|<\\?xml version=\"1.0\"\\?>|<!--|-->|<info/>|&amp;|&bad;|\n)", 0..10)) {
        let text = parts.concat();
        if let Err(e) = check_hwloc_xml("soup.xml", &text) {
            one_line_naming(&e.to_string(), "soup.xml");
        }
    }
}

proptest! {
    // hwloc parses each case: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn synthetic_descriptions_load((desc, pus) in small_synthetic()) {
        let m = load(&TopologySpec::from_str(&format!("synthetic:{desc}")).unwrap()).unwrap();
        prop_assert_eq!(m.pus.len() as u64, pus);
        let matrix = ClassMatrix::new(&m);
        prop_assert_eq!(matrix.pu_os_indexes().len() as u64, pus);
        let _ = TreeView::new(&m);
    }

    #[test]
    fn synthetic_garbage_is_an_error_not_a_panic(desc in "(pack|numa|core|pu|l[0-9]|group|x|:|[0-9]|\\(|\\)| ){0,16}") {
        let spec = TopologySpec::Synthetic(desc.clone());
        match load(&spec) {
            Ok(m) => prop_assert!(!m.pus.is_empty()),
            Err(e) => one_line_naming(&e.to_string(), desc.trim()),
        }
    }

    /// A valid hwloc XML cut at any byte loads or fails with one line naming the file.
    #[test]
    fn truncated_xml_is_an_error(cut in 0usize..5400) {
        let text = std::fs::read(fixture("two-socket-nic.xml")).unwrap();
        let cut = cut.min(text.len());
        let p = scratch("truncated.xml", &text[..cut]);
        match load(&TopologySpec::Xml(p.clone())) {
            Ok(m) => prop_assert!(!m.pus.is_empty()),
            Err(e) => one_line_naming(&e.to_string(), &p.display().to_string()),
        }
    }

    /// One attribute value of a valid hwloc XML replaced by a random one.
    #[test]
    fn xml_with_a_bad_attribute(which in 0usize..200, value in "(-1|0|[0-9]{1,25}|0x[0-9a-f]{0,20}|[a-zA-Z]{0,6}|)") {
        let text = std::fs::read_to_string(fixture("two-socket-nic.xml")).unwrap();
        let starts: Vec<usize> = text.match_indices("=\"").map(|(i, _)| i + 2).collect();
        let at = starts[which % starts.len()];
        let end = at + text[at..].find('"').unwrap();
        let mutated = format!("{}{}{}", &text[..at], value, &text[end..]);
        let p = scratch("attribute.xml", mutated.as_bytes());
        match load(&TopologySpec::Xml(p.clone())) {
            // Whatever hwloc accepts must convert into a usable model.
            Ok(m) => {
                let _ = ClassMatrix::new(&m);
                let _ = TreeView::new(&m);
            }
            Err(e) => one_line_naming(&e.to_string(), &p.display().to_string()),
        }
    }

    /// Machine JSON with one field replaced, deleted or the text truncated:
    /// loads into a model the class code can use, or fails naming the file.
    #[test]
    fn machine_json_mutations(which in 0usize..400, op in 0u8..4, value in "(-1|0|1|7|99999999999|\"x\"|null|\\[\\]|\\{\\}|true)") {
        let m = load(&TopologySpec::Synthetic("pack:2 core:2 pu:2".into())).unwrap();
        let text = m.to_json();
        let mutated = match op {
            0 => text[..which.min(text.len())].to_string(),
            _ => {
                // Positions of `": ` value starts.
                let starts: Vec<usize> = text.match_indices("\": ").map(|(i, _)| i + 3).collect();
                let at = starts[which % starts.len()];
                let rest = &text[at..];
                let len = rest.find([',', '\n']).unwrap_or(rest.len());
                match op {
                    1 => format!("{}{}{}", &text[..at], value, &rest[len..]),
                    2 => format!("{}{}", &text[..at], &rest[len..]).replacen(": ,", ": 0,", 1),
                    _ => format!("{}{}{}", &text[..at], &rest[..len], rest),
                }
            }
        };
        let p = scratch("machine.json", mutated.as_bytes());
        match load(&TopologySpec::Json(p.clone())) {
            Ok(m) => {
                let _ = ClassMatrix::new(&m);
                let _ = TreeView::new(&m);
            }
            Err(e) => one_line_naming(&e.to_string(), &p.display().to_string()),
        }
    }
}
