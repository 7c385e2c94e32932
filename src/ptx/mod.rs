//! PTX front end, shared by the CUDA backend (load-time signature checks) and the host
//! platform's PTX engine.
//!
//! Today it reads what a loader needs without a full parse: the `.entry` declarations of a
//! module and their `.param` lists (types, `.align`, arrays, `.ptr` attributes), so a
//! `TypedKernel`'s argument list can be checked against the kernel before the first launch.

mod params;

pub use params::{PtxEntry, PtxParam, PtxScalar, check_signature, parse_entries};
