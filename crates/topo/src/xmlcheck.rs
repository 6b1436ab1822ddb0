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
/// hwloc XML topology of a version hwloc 2.x can read. Returns the number
/// of PU objects it describes within the root's `allowed_cpuset` (hwloc
/// keeps those, and drops PUs whose cpusets contradict their ancestors'
/// without a word; the caller compares).
pub fn check_hwloc_xml(path: &str, text: &str) -> Result<usize, TopoError> {
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
    let mut pus = 0;
    let mut numa = 0;
    let mut objects = 0;
    // The root object's allowed_cpuset (None: every PU allowed).
    let mut allowed: Option<Option<Bitmap>> = None;
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
                if e.name().as_ref() == b"object" {
                    saw_object = true;
                    let attr = |name: &str| {
                        e.try_get_attribute(name)
                            .ok()
                            .flatten()
                            .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                    };
                    objects += 1;
                    check_attributes(e, objects, attr("type").as_deref().unwrap_or("?"))
                        .map_err(bad)?;
                    let root_allowed = allowed.get_or_insert_with(|| {
                        attr("allowed_cpuset").and_then(|t| Bitmap::parse(&t))
                    });
                    numa += usize::from(attr("type").as_deref() == Some("NUMANode"));
                    if attr("type").as_deref() == Some("PU") {
                        let index = attr("os_index").and_then(|i| i.parse::<u32>().ok());
                        pus += usize::from(match (root_allowed, index) {
                            (Some(b), Some(i)) => b.contains(i),
                            _ => true,
                        });
                    }
                }
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
    // hwloc's own messages for these two are an abort notice on stderr and
    // no errno.
    if pus == 0 {
        return Err(bad(
            "it describes no PU object within the allowed cpuset (a topology needs at least one)"
                .into(),
        ));
    }
    if numa == 0 {
        return Err(bad(
            "it has no NUMANode object (hwloc 2 topologies attach memory to at least one)".into(),
        ));
    }
    Ok(pus)
}

/// The attributes hwloc reads as numbers of an `<object>` (the `k`-th, of
/// type `kind`): bitmaps and the OS index are checked here, since hwloc
/// takes a malformed value as an empty set or zero without a word, and
/// every value must unescape (an undefined `&entity;` is kept verbatim).
fn check_attributes(
    e: &quick_xml::events::BytesStart<'_>,
    k: usize,
    kind: &str,
) -> Result<(), String> {
    for a in e.attributes() {
        let a = a.map_err(|err| format!("<object> #{k} ({kind}): bad attribute: {err}"))?;
        let name = String::from_utf8_lossy(a.key.as_ref()).into_owned();
        let value = a
            .unescape_value()
            .map_err(|err| format!("<object> #{k} ({kind}): attribute {name}: {err}"))?;
        let quoted = crate::text::one_line(&value);
        if name.ends_with("cpuset") || name.ends_with("nodeset") {
            if Bitmap::parse(&value).is_none() {
                return Err(format!(
                    "<object> #{k} ({kind}): {name}=\"{quoted}\" is not an hwloc bitmap (e.g. 0x000000ff or 0xffffffff,0x0000ffff)"
                ));
            }
        } else if name == "os_index" && value.trim().parse::<u32>().is_err() {
            return Err(format!(
                "<object> #{k} ({kind}): os_index=\"{quoted}\" is not an integer from 0 to 4294967295"
            ));
        }
    }
    Ok(())
}

/// An hwloc bitmap as XML writes it: comma-separated 32-bit hex words, most
/// significant first (`0xffffffff,0x0000ffff`), a zero word between others
/// written as nothing (`0x00000001,,0x00010000`); a leading `0xf...f` word
/// sets every bit above the others.
struct Bitmap {
    /// Least significant word first.
    words: Vec<u32>,
    infinite: bool,
}

impl Bitmap {
    fn parse(text: &str) -> Option<Bitmap> {
        let mut words = Vec::new();
        let mut infinite = false;
        for (k, part) in text.trim().split(',').enumerate() {
            // hwloc writes a zero word between others as nothing: `0x1,,0x2`.
            if part.trim().is_empty() && k > 0 {
                words.push(0);
                continue;
            }
            let hex = part.trim().strip_prefix("0x")?;
            if hex == "f...f" && k == 0 {
                infinite = true;
                continue;
            }
            words.push(u32::from_str_radix(hex, 16).ok()?);
        }
        words.reverse();
        Some(Bitmap { words, infinite })
    }

    fn contains(&self, i: u32) -> bool {
        match self.words.get((i / 32) as usize) {
            Some(w) => w >> (i % 32) & 1 == 1,
            None => self.infinite,
        }
    }
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

    const GOOD: &str = r#"<?xml version="1.0"?><topology version="2.0"><object type="Machine"><object type="NUMANode"/><object type="PU" os_index="0"/></object></topology>"#;

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

    #[test]
    fn hwloc_bitmaps_parse_as_hwloc_writes_them() {
        let b = Bitmap::parse("0xffffffff,0x0000ffff").unwrap();
        assert!(b.contains(0) && b.contains(15) && !b.contains(16) && b.contains(32));
        assert!(b.contains(63) && !b.contains(64));
        let inf = Bitmap::parse("0xf...f,0x00000001").unwrap();
        assert!(inf.contains(0) && !inf.contains(1) && inf.contains(32) && inf.contains(4000));
        assert!(Bitmap::parse("0xzz").is_none() && Bitmap::parse("ff").is_none());
        let gaps = Bitmap::parse("0x00000001,,0x00010000").unwrap();
        assert!(gaps.contains(16) && !gaps.contains(32) && gaps.contains(64) && !gaps.contains(65));
        assert!(Bitmap::parse(",0x1").is_none());
    }

    #[test]
    fn counts_the_allowed_pu_objects() {
        let t = r#"<topology version="2.0"><object type="Machine" allowed_cpuset="0x00000005">
            <object type="PU" os_index="0"/><object type="PU" os_index="1"/>
            <object type="PU" os_index="2"/></object></topology>"#;
        let e = check_hwloc_xml("t.xml", t).unwrap_err().to_string();
        assert!(e.contains("no NUMANode"), "{e}");
        let t = t.replace(
            "<object type=\"PU\" os_index=\"0\"/>",
            "<object type=\"NUMANode\"/><object type=\"PU\" os_index=\"0\"/>",
        );
        assert_eq!(check_hwloc_xml("t.xml", &t).unwrap(), 2);
        let machine_only = r#"<topology version="2.0"><object type="Machine"><object type="NUMANode"/></object></topology>"#;
        let e = check_hwloc_xml("t.xml", machine_only)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no PU object"), "{e}");
    }
}
