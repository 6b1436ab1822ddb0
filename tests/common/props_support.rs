//! Helpers shared by the crates' property tests (`crates/*/tests/props.rs`
//! include this file with `#[path]`; docs/testing.md).
#![allow(dead_code)]

/// The error is one line and names `what` (the file, option or value given).
pub fn one_line_naming(msg: &str, what: &str) {
    assert!(!msg.contains('\n'), "error spans lines: {msg:?}");
    assert!(msg.contains(what), "error does not name {what:?}: {msg}");
}

/// A valid text mutated at byte `at` (moved back to a char boundary), by
/// `op % 5`: 0 cut there, 1 up to 4 bytes replaced by `with`, 2 the line
/// deleted, 3 the line duplicated, 4 the next comma doubled.
pub fn mutate(text: &str, op: u8, at: usize, with: &str) -> String {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let line = || {
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
        (start, end)
    };
    match op % 5 {
        0 => text[..at].to_string(),
        1 => {
            let mut end = (at + 4).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            format!("{}{}{}", &text[..at], with, &text[end..])
        }
        2 => {
            let (start, end) = line();
            format!("{}{}", &text[..start], &text[end..])
        }
        3 => {
            let (start, end) = line();
            format!("{}{}", &text[..end], &text[start..end])
        }
        _ => format!("{}{}", &text[..at], &text[at..].replacen(',', ",,", 1)),
    }
}
