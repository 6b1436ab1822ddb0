//! The ready-to-use files (docs/formats/mpi-exports.md) and their readers:
//! - Open MPI: an MCA parameter file, `name = value` lines, read by
//!   `mpirun --tune FILE` or `OMPI_MCA_mca_base_envar_file_prefix=FILE`
//!   (4.1; NOT `mca_base_param_files=FILE` alone, which replaces the
//!   default files and, on Debian, drops the system file that excludes pml
//!   ucx and btl uct/ofi: Open MPI then runs pml cm, 40x slower latency);
//!   UCX variables (pml ucx) go in one `mca_base_env_list = A=1;B=2` line,
//!   which Open MPI exports to every rank.
//! - MPICH: a shell environment file, `export NAME=value` lines, for
//!   `source FILE` before `mpiexec` (Hydra forwards the whole environment).
//!
//! Every value is preceded by a comment saying why it is there.

use crate::space::Layer;
use std::path::Path;
use topocomm_measure::backends::MpiImpl;

/// The environment that makes Open MPI read an exported MCA file on top of
/// its default parameter files (what `mpirun --tune FILE` sets).
pub const OPENMPI_FILE_VAR: &str = "OMPI_MCA_mca_base_envar_file_prefix";

pub fn openmpi_file_env(abs_path: &Path) -> Vec<(String, String)> {
    vec![(OPENMPI_FILE_VAR.to_string(), abs_path.display().to_string())]
}

/// One exported value and the reason it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub value: String,
    /// One or more lines, written as `# ...` comments above the value.
    pub why: Vec<String>,
}

/// Renders the file for `layer`: `header` lines become comments on top.
pub fn render(layer: Layer, header: &[String], entries: &[Entry]) -> String {
    let mut s = String::new();
    for h in header {
        push_comment(&mut s, h);
    }
    s.push('\n');
    if entries.is_empty() {
        push_comment(
            &mut s,
            "No setting beat the defaults in both the search and the verification: nothing to set.",
        );
        return s;
    }
    match layer {
        Layer::Vader => {
            for e in entries {
                for w in &e.why {
                    push_comment(&mut s, w);
                }
                s.push_str(&format!("{} = {}\n\n", e.name, e.value));
            }
        }
        Layer::OmpiUcx => {
            for e in entries {
                push_comment(&mut s, &format!("{}={}:", e.name, e.value));
                for w in &e.why {
                    push_comment(&mut s, &format!("  {w}"));
                }
            }
            let list: Vec<String> = entries
                .iter()
                .map(|e| format!("{}={}", e.name, e.value))
                .collect();
            s.push_str(&format!("mca_base_env_list = {}\n", list.join(";")));
        }
        Layer::MpichUcx => {
            for e in entries {
                for w in &e.why {
                    push_comment(&mut s, w);
                }
                s.push_str(&format!("export {}={}\n\n", e.name, shell_quote(&e.value)));
            }
        }
    }
    s
}

fn push_comment(s: &mut String, text: &str) {
    for l in text.lines() {
        if l.is_empty() {
            s.push_str("#\n");
        } else {
            s.push_str(&format!("# {l}\n"));
        }
    }
}

/// Values are numbers and identifiers; anything else is single-quoted.
fn shell_quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.,:/+".contains(c))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

/// Reads an MCA parameter file back: `(name, value)` per `name = value`
/// line; `mca_base_env_list` is split into its `NAME=value` items.
pub fn parse_mca_file(path: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| format!("{path}:{}: expected 'name = value', found '{l}'", i + 1))?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{path}:{}: bad parameter name '{k}'", i + 1));
        }
        if k == "mca_base_env_list" {
            for item in v.split(';').filter(|x| !x.is_empty()) {
                let (n, val) = item.split_once('=').ok_or_else(|| {
                    format!("{path}:{}: env list item '{item}' is not NAME=value", i + 1)
                })?;
                out.push((n.to_string(), val.to_string()));
            }
        } else {
            out.push((k.to_string(), v.to_string()));
        }
    }
    Ok(out)
}

/// Reads an environment file back: `(NAME, value)` per `export NAME=value`
/// line (single quotes removed).
pub fn parse_env_file(path: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let rest = l.strip_prefix("export ").ok_or_else(|| {
            format!(
                "{path}:{}: expected 'export NAME=value', found '{l}'",
                i + 1
            )
        })?;
        let (k, v) = rest.split_once('=').ok_or_else(|| {
            format!(
                "{path}:{}: expected 'export NAME=value', found '{l}'",
                i + 1
            )
        })?;
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{path}:{}: bad variable name '{k}'", i + 1));
        }
        let v = v
            .strip_prefix('\'')
            .and_then(|x| x.strip_suffix('\''))
            .map_or_else(|| v.to_string(), |x| x.replace("'\\''", "'"));
        out.push((k.to_string(), v));
    }
    Ok(out)
}

/// An exported file, read once: its values (syntax-checked) and the
/// environment that makes an MPI job read it the way the file's users
/// would. Open MPI reads the MCA file itself (as `mpirun --tune` makes it
/// do, on top of its default files); MPICH's variables are what
/// `source FILE` would export.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub values: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

/// Reads `path`, exported for `which`; errors start with the file's path.
pub fn read_export(which: MpiImpl, path: &Path) -> Result<Export, String> {
    let abs = path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = std::fs::read_to_string(&abs).map_err(|e| format!("{}: {e}", abs.display()))?;
    let shown = abs.display().to_string();
    Ok(match which {
        MpiImpl::OpenMpi => Export {
            values: parse_mca_file(&shown, &text)?,
            env: openmpi_file_env(&abs),
        },
        MpiImpl::Mpich => {
            let values = parse_env_file(&shown, &text)?;
            Export {
                env: values.clone(),
                values,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(n: &str, v: &str) -> Entry {
        Entry {
            name: n.into(),
            value: v.into(),
            why: vec!["x3.1 bandwidth over 64K-4M".into()],
        }
    }

    #[test]
    fn files_round_trip_through_their_readers() {
        let head = vec!["topocomm tune --mpi openmpi".to_string()];
        let t = render(
            Layer::Vader,
            &head,
            &[e("btl_vader_single_copy_mechanism", "none")],
        );
        assert!(t.contains("# x3.1 bandwidth"));
        assert_eq!(
            parse_mca_file("f", &t).unwrap(),
            vec![("btl_vader_single_copy_mechanism".into(), "none".into())]
        );
        let t = render(
            Layer::OmpiUcx,
            &head,
            &[e("UCX_RNDV_THRESH", "65536"), e("UCX_TLS", "self,sm")],
        );
        assert!(t.contains("mca_base_env_list = UCX_RNDV_THRESH=65536;UCX_TLS=self,sm\n"));
        assert_eq!(parse_mca_file("f", &t).unwrap().len(), 2);
        let t = render(
            Layer::MpichUcx,
            &head,
            &[e("UCX_RNDV_SCHEME", "put_zcopy"), e("X", "a b")],
        );
        assert!(t.contains("export UCX_RNDV_SCHEME=put_zcopy\n"));
        assert_eq!(
            parse_env_file("f", &t).unwrap(),
            vec![
                ("UCX_RNDV_SCHEME".into(), "put_zcopy".into()),
                ("X".into(), "a b".into())
            ]
        );
        let t = render(Layer::MpichUcx, &head, &[]);
        assert!(t.contains("nothing to set"));
        assert!(parse_env_file("f", &t).unwrap().is_empty());
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let err = parse_mca_file("f.conf", "# c\nbtl_vader_eager_limit 4096\n").unwrap_err();
        assert!(err.starts_with("f.conf:2:"), "{err}");
        let err = parse_env_file("f.env", "UCX_TLS=sm\n").unwrap_err();
        assert!(err.contains("f.env:1") && err.contains("export"), "{err}");
    }
}
