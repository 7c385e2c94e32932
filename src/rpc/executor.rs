//! Executor integration.

/// The executor's server.
pub struct ExecutorRpc;
/// The OpenCL C client.
pub const OPENCL_CLIENT_SOURCE: &str = "";
