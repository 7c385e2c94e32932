//! Host-side printf formatting.
