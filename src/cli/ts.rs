//! PLACEHOLDER: owned by the ObjectId/time helper; replaced before commit.
use crate::error::Failure;
#[derive(Debug, clap::Args)]
pub struct TsArgs { pub value: String }
pub fn run(_a: TsArgs) -> Result<u8, Failure> { Err(Failure::new("not implemented yet")) }
