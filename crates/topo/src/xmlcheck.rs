//! Pre-flight check of hwloc XML files.
//!
//! Debian's hwloc parses XML through libxml2, which prints its own diagnostics
//! on stderr and sometimes accepts truncated input. Checking well-formedness,
//! the root element and the format version here first turns every bad file
//! into one clear error line, and keeps partial topologies out.

use crate::TopoError;
use quick_xml::events::Event;
use quick_xml::Reader;

/// Checks that `text` (the content of `path`) is a complete, well-formed
/// hwloc XML topology of a version hwloc 2.x can read.
pub fn check_hwloc_xml(path: &str, text: &str) -> Result<(), TopoError> {
    // One line, whatever the parser quotes of the file.
    let bad = |reason: String| TopoError::BadXml {
        path: path.to_string(),
        reason: reason.replace(['\n', '\r'], " "),
    };
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.is_empty() {
        return Err(bad("the file is empty".into()));
    }
    if !trimmed.starts_with('<') {
        return Err(bad(
            "it is not XML (expected '<?xml' or '<topology' at the start)".into(),
        ));
    }
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut open: Vec<String> = Vec::new();
    let mut saw_root = false;
    let mut saw_object = false;
    loop {
        let pos = reader.buffer_position();
        let event = match reader.read_event() {
            Ok(ev) => ev,
            // An error raised at the very end of the input means the file
            // stops in the middle of a tag: say "truncated", not "malformed".
            Err(_) if reader.buffer_position() as usize >= text.len() => {
                return Err(bad(format!(
                    "the file is truncated (it ends inside a tag after byte {pos})"
                )))
            }
            Err(e) => return Err(bad(format!("malformed XML near byte {pos}: {e}"))),
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) if saw_root => {
                saw_object |= e.name().as_ref() == b"object";
                if matches!(event, Event::Start(_)) {
                    open.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
                }
            }
            Event::Start(e) => {
                if !saw_root {
                    check_root(path, &e)?;
                    saw_root = true;
                }
                open.push(String::from_utf8_lossy(e.name().as_ref()).into_owned());
            }
            Event::Empty(e) if !saw_root => {
                check_root(path, &e)?;
                saw_root = true;
            }
            Event::End(_) => {
                open.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !saw_root {
        return Err(bad("no <topology> element found".into()));
    }
    if let Some(last) = open.last() {
        return Err(bad(format!(
            "the file is truncated (<{last}> is never closed; {} element(s) left open)",
            open.len()
        )));
    }
    if !saw_object {
        // hwloc's own error here is an errno ("Invalid argument").
        return Err(bad(
            "<topology> holds no <object> (hwloc needs at least the Machine object)".into(),
        ));
    }
    Ok(())
}

/// The root must be `<topology>`, of a format version below 3.
fn check_root(path: &str, e: &quick_xml::events::BytesStart<'_>) -> Result<(), TopoError> {
    let bad = |reason: String| TopoError::BadXml {
        path: path.to_string(),
        reason,
    };
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    if name != "topology" {
        return Err(bad(format!(
            "the root element is <{name}>, expected <topology>"
        )));
    }
    if let Ok(Some(v)) = e.try_get_attribute("version") {
        let version = String::from_utf8_lossy(&v.value).into_owned();
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| bad(format!("unreadable version attribute '{version}'")))?;
        if major >= 3 {
            return Err(TopoError::UnsupportedXmlVersion {
                path: path.to_string(),
                version,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        r#"<?xml version="1.0"?><topology version="2.0"><object type="Machine"/></topology>"#;

    #[test]
    fn accepts_complete_v2() {
        check_hwloc_xml("t.xml", GOOD).unwrap();
    }

    #[test]
    fn a_topology_without_objects_is_named_not_left_to_hwloc() {
        for t in [
            "<?xml version=\"1.0\"?>\n<topology>\n</topology>\n",
            "<topology version=\"2.0\"/>",
        ] {
            let e = check_hwloc_xml("t.xml", t).unwrap_err().to_string();
            assert!(e.contains("t.xml") && e.contains("no <object>"), "{e}");
        }
    }

    #[test]
    fn rejects_empty_nonxml_truncated_v3() {
        assert!(check_hwloc_xml("t.xml", "")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(check_hwloc_xml("t.xml", "hello")
            .unwrap_err()
            .to_string()
            .contains("not XML"));
        let cut = &GOOD[..GOOD.len() - 12];
        let e = check_hwloc_xml("t.xml", cut).unwrap_err().to_string();
        assert!(e.contains("truncated") || e.contains("malformed"), "{e}");
        let v3 = GOOD.replace("2.0", "3.0");
        assert!(matches!(
            check_hwloc_xml("t.xml", &v3),
            Err(TopoError::UnsupportedXmlVersion { .. })
        ));
        let other = r#"<?xml version="1.0"?><html></html>"#;
        assert!(check_hwloc_xml("t.xml", other)
            .unwrap_err()
            .to_string()
            .contains("<html>"));
    }
}
