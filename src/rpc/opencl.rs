//! The OpenCL C client: `client.cl`, embedded, and the geometry defines the OpenCL loader puts
//! in front of it when a spec asks for RPC ([`MultiKernelLoaderSpec::with_rpc`]).
//!
//! [`MultiKernelLoaderSpec::with_rpc`]: crate::MultiKernelLoaderSpec::with_rpc

use super::layout::{DOORBELL_COUNTER, EXECUTOR_PORTS, Geometry, Layout};

/// The OpenCL C client source (lane size 1, Current layout). See the comment at its top for
/// the functions kernels call.
pub const OPENCL_CLIENT_SOURCE: &str = include_str!("client.cl");

/// The executor block's geometry as the OpenCL client sees it.
fn executor_geometry() -> Geometry {
    Geometry::new(Layout::Current, EXECUTOR_PORTS, 1).expect("64 ports, lane size 1 is valid") // ok: constant
}

#[cfg_attr(not(feature = "opencl"), allow(dead_code))]
/// What the OpenCL loader puts in front of a kernel's source: the geometry defines, the client,
/// and a `#line 1` so compiler messages name the kernel's own lines. The client's lock bitmap
/// (`SE_RPC_LOCKS`) sits right after the protocol's bytes, in the same allocation.
pub(crate) fn opencl_prelude() -> String {
    let g = executor_geometry();
    format!(
        "#define SE_RPC_PORTS {}\n#define SE_RPC_INBOX {}\n#define SE_RPC_OUTBOX {}\n\
         #define SE_RPC_HEADERS {}\n#define SE_RPC_PACKETS {}\n#define SE_RPC_LOCKS {}\n\
         #define SE_RPC_DOORBELL_COUNTER {DOORBELL_COUNTER}\n\
         {OPENCL_CLIENT_SOURCE}\n#line 1\n",
        g.port_count,
        g.client_inbox(),
        g.client_outbox(),
        g.headers(),
        g.packets(),
        g.allocation_size(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prelude_defines_the_executor_geometry() {
        let p = opencl_prelude();
        // Current layout, 64 ports, lane 1 (rpc-protocol.md section 2 arithmetic).
        for d in [
            "SE_RPC_PORTS 64\n",
            "SE_RPC_INBOX 64\n",
            "SE_RPC_OUTBOX 320\n",
            "SE_RPC_HEADERS 576\n",
            "SE_RPC_PACKETS 1600\n",
            "SE_RPC_LOCKS 5696\n",
            "SE_RPC_DOORBELL_COUNTER 32\n",
        ] {
            assert!(p.contains(&format!("#define {d}")), "{d}");
        }
        assert!(p.ends_with("\n#line 1\n"));
        assert_eq!(executor_geometry().lock_bitmap_bytes(), 8);
    }
}
