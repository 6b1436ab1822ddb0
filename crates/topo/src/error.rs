//! Errors of the topology layer. Every message is one line that names the
//! input (file, synthetic string, PU) and says what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TopoError {
    #[error("cannot read topology file '{path}': {reason}")]
    Io { path: String, reason: String },
    #[error("topology file '{path}' is not a valid hwloc XML topology: {reason}")]
    BadXml { path: String, reason: String },
    #[error("topology file '{path}' is hwloc XML version {version}; the hwloc 2.9 used here reads only v1 and v2 XML (export it with hwloc 2.x's lstopo, or `lstopo --export-xml-flags v2` on hwloc 3)")]
    UnsupportedXmlVersion { path: String, version: String },
    #[error("topology file '{path}' is not a valid topocomm machine JSON: {reason}")]
    BadJson { path: String, reason: String },
    #[error("synthetic topology '{description}' is invalid: {reason}")]
    Synthetic { description: String, reason: String },
    #[error("hwloc could not load {input}: {reason}")]
    Hwloc { input: String, reason: String },
    #[error("PU with OS index {os_index} does not exist on this topology (PUs: {available})")]
    NoSuchPu { os_index: u32, available: String },
    #[error("{location} {problem}")]
    Location { location: String, problem: String },
    #[error("invalid PU pair '{text}': {reason}")]
    BadPair { text: String, reason: String },
}
