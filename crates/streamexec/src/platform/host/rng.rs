//! Philox random fills on the host platform: [`crate::philox`]'s pure function of (seed,
//! offset, index), computed in parallel chunks on the executor's rayon pool in stream order,
//! each chunk generated into a private buffer and stored into device memory with
//! `device_bytes` (see blas.rs for why device memory is never touched directly).

use std::sync::Arc;

use rayon::prelude::*;

use super::device::HostExecutor;
use crate::error::Result;
use crate::interface::rng::PhiloxFill;
use crate::interface::{RngSupport, StreamInterface};
use crate::ptx::device_bytes;
use crate::types::philox::{self, PhiloxStream};

/// Elements per parallel task of a fill (a multiple of every `elems_per_block`).
const FILL_CHUNK: u64 = 4096;

impl RngSupport for HostExecutor {
    unsafe fn philox_fill(&self, stream: &dyn StreamInterface, fill: &PhiloxFill) -> Result<()> {
        let size = fill.dist.elem_size();
        let dst = self.pin(fill.dst.addr, fill.count * size, "then_populate_rand")?;
        let (pool, fill) = (Arc::clone(&self.pool), *fill);
        let ps = PhiloxStream {
            key: fill.key,
            counter_hi: fill.counter_hi,
            offset: fill.offset,
        };
        stream.host_callback(Box::new(move || {
            pool.install(|| {
                (0..fill.count.div_ceil(FILL_CHUNK))
                    .into_par_iter()
                    .for_each(|ci| {
                        let first = ci * FILL_CHUNK;
                        let len = FILL_CHUNK.min(fill.count - first);
                        let mut buf = [0u8; (FILL_CHUNK * 8) as usize];
                        let out = &mut buf[..(len * size) as usize];
                        philox::generate(&ps, fill.dist, first, out);
                        // SAFETY: elements `first..first + len` lie inside the pinned range.
                        unsafe {
                            device_bytes::store_bytes(
                                dst.as_ptr().wrapping_add((first * size) as usize),
                                out,
                            )
                        };
                    })
            });
            Ok(())
        }))
    }
}
