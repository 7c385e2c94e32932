//! The OpenCL C client: `client.cl`, embedded, and the geometry defines an OpenCL loader puts
//! in front of it (streamexec's, for a spec `with_rpc`); with MPI (streamexec's `with_mpi`),
//! the Emissary client (`emissary_client.cl`) and the MPI stubs (`mpi_client.cl`) after it.

use super::layout::{DOORBELL_COUNTER, EXECUTOR_PORTS, Geometry, Layout};

/// The OpenCL C client source (lane size 1, Current layout). See the comment at its top for
/// the functions kernels call.
pub const OPENCL_CLIENT_SOURCE: &str = include_str!("client.cl");

/// The OpenCL C Emissary client (`se_emissary_call` and the record helpers: one
/// `OFFLOAD_EMISSARY` round trip per call, lane size 1). Goes after
/// [`OPENCL_CLIENT_SOURCE`].
pub const OPENCL_EMISSARY_SOURCE: &str = include_str!("emissary_client.cl");

/// The OpenCL C MPI stubs (`MPI_Send(rpc, ...)`, ...: Emissary calls of API 3) and MPI's
/// handles. Goes after [`OPENCL_EMISSARY_SOURCE`].
pub const OPENCL_MPI_SOURCE: &str = include_str!("mpi_client.cl");

/// The executor block's geometry as the OpenCL client sees it.
fn executor_geometry() -> Geometry {
    Geometry::new(Layout::Current, EXECUTOR_PORTS, 1).expect("64 ports, lane size 1 is valid") // ok: constant
}

/// What an OpenCL loader puts in front of a kernel's source: the geometry defines, the client,
/// and a `#line 1` so compiler messages name the kernel's own lines. The client's lock bitmap
/// (`SE_RPC_LOCKS`) sits right after the protocol's bytes, in the same allocation. With `mpi`,
/// the Emissary client and the MPI stubs follow the client. The block the client reaches is an
/// executor's: [`EXECUTOR_PORTS`] ports of lane size 1 in the current layout.
pub fn opencl_prelude(mpi: bool) -> String {
    let g = executor_geometry();
    let mpi = if mpi {
        format!("{OPENCL_EMISSARY_SOURCE}\n{OPENCL_MPI_SOURCE}\n")
    } else {
        String::new()
    };
    format!(
        "#define SE_RPC_PORTS {}\n#define SE_RPC_INBOX {}\n#define SE_RPC_OUTBOX {}\n\
         #define SE_RPC_HEADERS {}\n#define SE_RPC_PACKETS {}\n#define SE_RPC_LOCKS {}\n\
         #define SE_RPC_DOORBELL_COUNTER {DOORBELL_COUNTER}\n\
         {OPENCL_CLIENT_SOURCE}\n{mpi}#line 1\n",
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
        let p = opencl_prelude(false);
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
        assert!(!p.contains("se_emissary_call"));
    }

    #[test]
    fn the_mpi_prelude_puts_the_emissary_client_and_the_stubs_after_the_client() {
        let p = opencl_prelude(true);
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(at("se_rpc_port se_rpc_open(") < at("uint se_emissary_call("));
        assert!(at("uint se_emissary_call(") < at("int MPI_Send("));
        assert!(p.ends_with("\n#line 1\n"));
    }
}
