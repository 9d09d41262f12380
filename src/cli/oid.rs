//! PLACEHOLDER: owned by the ObjectId/time helper; replaced before commit.
use crate::error::Failure;
#[derive(Debug, clap::Subcommand)]
pub enum OidCommand { Decode { hex: Vec<String> } }
pub fn run(_c: OidCommand) -> Result<u8, Failure> { Err(Failure::new("not implemented yet")) }
