//! `topocomm completions <SHELL>`: the shell completion script, and the
//! hidden `topocomm manpages --out DIR`: the man pages (`topocomm.1`,
//! `topocomm-<command>.1`, `topocomm-bench-p2p.1`, ...). Both are generated
//! from the clap definition of the command line, so they cannot drift from
//! it; `make install` writes them (docs/install.md).

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// Folder to write the pages into (created when missing)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Prints the completion script of `shell` for the command line `cmd`,
/// without its hidden commands (the bash generator would offer them).
pub fn run(a: &Args, cmd: clap::Command) -> Result<ExitCode> {
    let visible: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let mut shown = clap::Command::new("topocomm")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(visible);
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut shown, "topocomm", &mut buf);
    std::io::Write::write_all(&mut std::io::stdout(), &buf).context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// Writes one man page per visible command of `cmd` into `a.out` and lists
/// the files written, one per line.
pub fn man(a: &ManArgs, cmd: clap::Command) -> Result<ExitCode> {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("--out {}: cannot create the folder", a.out.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, &a.out, &mut written)
        .with_context(|| format!("--out {}: cannot write the man pages", a.out.display()))?;
    let list: String = written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    std::io::Write::write_all(&mut std::io::stdout(), list.as_bytes())
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The page of `cmd` and, depth first, of its visible subcommands (their
/// display names, set by `build`, are `topocomm-<sub>[-<subsub>]`).
fn write_pages(cmd: &clap::Command, out: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| date_of(&s));
    let mut page = clap_mangen::Man::new(cmd.clone()).manual("topocomm manual");
    if let Some(d) = date {
        page = page.date(d);
    }
    written.push(page.generate_to(out)?);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, out, written)?;
    }
    Ok(())
}

/// `YYYY-MM-DD` of a `SOURCE_DATE_EPOCH` value (reproducible builds).
fn date_of(epoch: &str) -> Option<String> {
    let secs: i64 = epoch.trim().parse().ok()?;
    let (y, m, d, ..) = topocomm_measure::meta::civil_utc(secs);
    Some(format!("{y:04}-{m:02}-{d:02}"))
}

#[cfg(test)]
mod tests {
    use super::date_of;

    #[test]
    fn epoch_dates() {
        assert_eq!(date_of("0").as_deref(), Some("1970-01-01"));
        assert_eq!(date_of("951782400").as_deref(), Some("2000-02-29"));
        assert_eq!(date_of("1795478400").as_deref(), Some("2026-11-24"));
        assert_eq!(date_of("x"), None);
    }
}
