//! Where everything sits in the shared RPC block, for both layouts of the LLVM GPU libc protocol,
//! and the bytes of the device-side `Client` struct (`__llvm_rpc_client`).
//!
//! Pure arithmetic, no memory access: the offsets here are checked against the table of worked
//! values in `shared/rpc-protocol.md` by the unit tests below.

use crate::error::{Error, Result};

/// Which revision of the shared-memory layout the device code was built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Newest upstream (2026): a 64-byte doorbell first, at most 16384 ports, `Client` = 2096 B.
    Current,
    /// LLVM 20 to 22: no doorbell, at most 4096 ports, `Client` = 552 B.
    PreDoorbell,
}

impl Layout {
    /// Size of the doorbell prefix in bytes.
    pub const fn doorbell_bytes(self) -> usize {
        match self {
            Layout::Current => 64,
            Layout::PreDoorbell => 0,
        }
    }

    /// The largest port count the device's lock bitmap can hold.
    pub const fn max_port_count(self) -> usize {
        match self {
            Layout::Current => 16384,
            Layout::PreDoorbell => 4096,
        }
    }

    /// `sizeof(rpc::Client)` on the device, the size of `__llvm_rpc_client`.
    pub const fn client_image_size(self) -> usize {
        self.pointers_end() + self.max_port_count() / 32 * 4
    }

    /// Offset of the lock bitmap in the `Client` struct (after the count and the pointers).
    pub(crate) const fn pointers_end(self) -> usize {
        match self {
            Layout::Current => 48,
            Layout::PreDoorbell => 40,
        }
    }

    /// The layout whose `Client` struct has `symbol_size` bytes (the ELF `st_size` of
    /// `__llvm_rpc_client`), or `None` for a size no known revision has.
    pub const fn from_client_size(symbol_size: usize) -> Option<Layout> {
        if symbol_size == Layout::Current.client_image_size() {
            Some(Layout::Current)
        } else if symbol_size == Layout::PreDoorbell.client_image_size() {
            Some(Layout::PreDoorbell)
        } else {
            None
        }
    }
}

/// The name of the global through which LLVM GPU libc device code finds its RPC client (the
/// `Client` struct whose bytes [`Geometry::client_image`] gives).
pub const CLIENT_SYMBOL: &str = "__llvm_rpc_client";

/// Ports of an executor's server (each is one warp's worth of concurrent calls). A convention
/// both sides share: the OpenCL loader compiles it into the client's geometry defines before any
/// server exists.
pub const EXECUTOR_PORTS: usize = 64;

/// Offset of the doorbell's counter in the block (current layout): inside the doorbell's own
/// padding, so it lives wherever the block does. The doorbell's `value` points here.
pub const DOORBELL_COUNTER: usize = 32;
/// Offset of the doorbell's event mailbox (its `mailbox` points here; a first ring stores the
/// `event_id`, 0, here).
pub const DOORBELL_EVENT: usize = 40;

/// Byte size of one packet slot (`rpc::Buffer`).
pub const PACKET_BYTES: usize = 64;
/// One 64-byte packet slot, as eight little-endian words.
pub type Packet = [u64; 8];
/// Byte size of one port header (`mask: u64`, `opcode: u32`, padding).
pub const HEADER_BYTES: usize = 16;

const fn align8(x: usize) -> usize {
    (x + 7) & !7
}

/// A validated (layout, port count, lane size) and the offsets it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The layout revision.
    pub layout: Layout,
    /// Number of ports.
    pub port_count: usize,
    /// Packet slots per port: the client's warp width (1, 32 or 64).
    pub lane_size: usize,
}

impl Geometry {
    /// Checks the port count (1..=the layout's maximum) and lane size (1, 32 or 64).
    pub fn new(layout: Layout, port_count: usize, lane_size: usize) -> Result<Geometry> {
        if port_count == 0 || port_count > layout.max_port_count() {
            return Err(Error::invalid(
                "rpc::Server::new",
                format!(
                    "port_count {port_count} is outside 1..={} for the {layout:?} layout",
                    layout.max_port_count()
                ),
            ));
        }
        if !matches!(lane_size, 1 | 32 | 64) {
            return Err(Error::invalid(
                "rpc::Server::new",
                format!(
                    "lane_size {lane_size} is not 1, 32 or 64; use 1 for CPU clients, 32 for \
                     NVPTX, the wavefront size for AMDGPU"
                ),
            ));
        }
        Ok(Geometry {
            layout,
            port_count,
            lane_size,
        })
    }

    /// Offset of mailbox array A: the client's inbox, the server's outbox.
    pub const fn client_inbox(&self) -> usize {
        self.layout.doorbell_bytes()
    }
    /// Offset of mailbox array B: the client's outbox, the server's inbox.
    pub const fn client_outbox(&self) -> usize {
        self.client_inbox() + 4 * self.port_count
    }
    /// Offset of the header array.
    pub const fn headers(&self) -> usize {
        align8(self.layout.doorbell_bytes() + 8 * self.port_count)
    }
    /// Offset of the packet array.
    pub const fn packets(&self) -> usize {
        align8(self.headers() + HEADER_BYTES * self.port_count)
    }
    /// Bytes the shared block needs.
    pub const fn allocation_size(&self) -> usize {
        self.packets() + PACKET_BYTES * self.port_count * self.lane_size
    }
    /// Offset of the packet of `port`, `lane`.
    pub const fn packet(&self, port: usize, lane: usize) -> usize {
        self.packets() + (port * self.lane_size + lane) * PACKET_BYTES
    }
    /// Offset of the header of `port`.
    pub const fn header(&self, port: usize) -> usize {
        self.headers() + port * HEADER_BYTES
    }

    /// Bytes of a lock bitmap for this block's ports (one bit per port, in 32-bit words): what a
    /// device client that keeps its port locks right after the protocol's bytes (the OpenCL
    /// client) needs there.
    pub const fn lock_bitmap_bytes(&self) -> usize {
        self.port_count.div_ceil(32) * 4
    }

    /// The device-side `Client` struct for a block whose first byte the device sees at `base`:
    /// port count, pointers into the block, and a zeroed lock bitmap.
    pub fn client_image(&self, base: u64) -> Vec<u8> {
        self.client_image_ports(base, 0, self.port_count)
    }

    /// A device-side `Client` struct that sees only ports `first..first + count` of the block
    /// at `base`: its port count is `count` and its mailbox, header and packet pointers start
    /// at port `first`, so its own lock bitmap guards ports no other client half opens. The
    /// doorbell stays the block's. The caller keeps the range inside the block.
    pub fn client_image_ports(&self, base: u64, first: usize, count: usize) -> Vec<u8> {
        debug_assert!(count > 0 && first + count <= self.port_count);
        let mut image = vec![0u8; self.layout.client_image_size()];
        image[0..4].copy_from_slice(&(count as u32).to_le_bytes());
        let mut pointers = Vec::with_capacity(5);
        if self.layout == Layout::Current {
            pointers.push(base); // the doorbell sits at the start of the block
        }
        let first = first as u64;
        pointers.extend([
            base + self.client_inbox() as u64 + 4 * first,
            base + self.client_outbox() as u64 + 4 * first,
            base + self.headers() as u64 + HEADER_BYTES as u64 * first,
            base + self.packets() as u64 + (PACKET_BYTES * self.lane_size) as u64 * first,
        ]);
        for (i, p) in pointers.iter().enumerate() {
            image[8 + 8 * i..16 + 8 * i].copy_from_slice(&p.to_le_bytes());
        }
        image
    }

    /// Reads a client image back: the block's geometry (with `lane_size`), its base address,
    /// and the ports the image sees (`first`, `count`), or `None` when its pointers describe
    /// no block of that layout (what [`client_image_ports`](Self::client_image_ports) writes,
    /// for some port count, base and range).
    pub fn parse_client_image(
        image: &[u8],
        lane_size: usize,
    ) -> Option<(Geometry, u64, usize, usize)> {
        let layout = Layout::from_client_size(image.len())?;
        let word = |at: usize| u64::from_le_bytes(image[at..at + 8].try_into().unwrap_or([0; 8]));
        let count = u32::from_le_bytes(image[0..4].try_into().unwrap_or([0; 4])) as usize;
        let at = if layout == Layout::Current { 16 } else { 8 };
        let (inbox, outbox, headers) = (word(at), word(at + 8), word(at + 16));
        let span = outbox.checked_sub(inbox)?;
        if span % 4 != 0 {
            return None;
        }
        let ports = usize::try_from(span / 4).ok()?;
        let geo = Geometry::new(layout, ports, lane_size).ok()?;
        let (base, first) = if layout == Layout::Current {
            let base = word(8);
            let off = inbox.checked_sub(base + geo.client_inbox() as u64)?;
            (base, off / 4)
        } else {
            // inbox = base + 4 first, headers = base + H + 16 first: 12 first = headers - H - inbox.
            let off = headers.checked_sub(inbox + geo.headers() as u64)?;
            if off % 12 != 0 {
                return None;
            }
            (inbox.checked_sub(off / 3)?, off / 12)
        };
        let first = usize::try_from(first).ok()?;
        if base == 0 || !base.is_multiple_of(8) || count == 0 || first + count > ports {
            return None;
        }
        let expected = geo.client_image_ports(base, first, count);
        let end = layout.pointers_end();
        (image[..end] == expected[..end]).then_some((geo, base, first, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_upstream_builds() {
        // (layout, P, L, inbox, outbox, H, K, total) from rpc-protocol.md section 2.
        let table = [
            (Layout::Current, 1, 1, 64, 68, 72, 88, 152),
            (Layout::Current, 64, 32, 64, 320, 576, 1600, 132672),
            (Layout::Current, 4096, 64, 64, 16448, 32832, 98368, 16875584),
            (
                Layout::Current,
                16384,
                32,
                64,
                65600,
                131136,
                393280,
                33947712,
            ),
            (Layout::PreDoorbell, 1, 1, 0, 4, 8, 24, 88),
            (Layout::PreDoorbell, 64, 32, 0, 256, 512, 1536, 132608),
            (
                Layout::PreDoorbell,
                4096,
                64,
                0,
                16384,
                32768,
                98304,
                16875520,
            ),
        ];
        for (layout, p, l, inbox, outbox, h, k, total) in table {
            let g = Geometry::new(layout, p, l).unwrap();
            assert_eq!(
                (
                    g.client_inbox(),
                    g.client_outbox(),
                    g.headers(),
                    g.packets(),
                    g.allocation_size()
                ),
                (inbox, outbox, h, k, total),
                "{layout:?} P={p} L={l}"
            );
        }
    }

    #[test]
    fn client_image_sizes_and_fields() {
        assert_eq!(Layout::Current.client_image_size(), 2096);
        assert_eq!(Layout::PreDoorbell.client_image_size(), 552);
        assert_eq!(Layout::from_client_size(2096), Some(Layout::Current));
        assert_eq!(Layout::from_client_size(552), Some(Layout::PreDoorbell));
        assert_eq!(Layout::from_client_size(96), None);
        let base = 0x7000_0000_1000u64;
        let word = |img: &[u8], at: usize| u64::from_le_bytes(img[at..at + 8].try_into().unwrap());
        let g = Geometry::new(Layout::Current, 64, 32).unwrap();
        let img = g.client_image(base);
        assert_eq!(u32::from_le_bytes(img[0..4].try_into().unwrap()), 64);
        assert_eq!(
            [8, 16, 24, 32, 40].map(|o| word(&img, o)),
            [base, base + 64, base + 320, base + 576, base + 1600]
        );
        assert!(img[48..].iter().all(|&b| b == 0));
        let g = Geometry::new(Layout::PreDoorbell, 64, 32).unwrap();
        let img = g.client_image(base);
        assert_eq!(img.len(), 552);
        assert_eq!(
            [8, 16, 24, 32].map(|o| word(&img, o)),
            [base, base + 256, base + 512, base + 1536]
        );
        assert!(img[40..].iter().all(|&b| b == 0));
    }

    #[test]
    fn ranged_images_parse_back_to_their_block_and_range() {
        let base = 0x7000_0000_1000u64;
        for layout in [Layout::Current, Layout::PreDoorbell] {
            for (ports, lanes, first, count) in [
                (64, 1, 0, 64),
                (1024, 32, 64, 64),
                (512, 64, 448, 64),
                (3, 32, 2, 1),
            ] {
                let g = Geometry::new(layout, ports, lanes).unwrap();
                let img = g.client_image_ports(base, first, count);
                assert_eq!(
                    Geometry::parse_client_image(&img, lanes),
                    Some((g, base, first, count)),
                    "{layout:?} {ports} {lanes} {first} {count}"
                );
                // The range's first mailbox, header and packet are the block's.
                let word = |at: usize| u64::from_le_bytes(img[at..at + 8].try_into().unwrap());
                let at = if layout == Layout::Current { 16 } else { 8 };
                assert_eq!(word(at), base + (g.client_inbox() + 4 * first) as u64);
                assert_eq!(word(at + 16), base + g.header(first) as u64);
                assert_eq!(word(at + 24), base + g.packet(first, 0) as u64);
                // A corrupted pointer or a range past the block is refused.
                let mut bad = img.clone();
                bad[at + 16] ^= 8;
                assert_eq!(Geometry::parse_client_image(&bad, lanes), None);
                let mut bad = img.clone();
                bad[0..4].copy_from_slice(&((ports - first + 1) as u32).to_le_bytes());
                assert_eq!(Geometry::parse_client_image(&bad, lanes), None);
            }
        }
    }

    #[test]
    fn bad_geometry_is_an_error() {
        assert!(Geometry::new(Layout::Current, 0, 1).is_err());
        assert!(Geometry::new(Layout::PreDoorbell, 4097, 1).is_err());
        assert!(Geometry::new(Layout::Current, 16384, 1).is_ok());
        assert!(Geometry::new(Layout::Current, 4, 16).is_err());
    }
}
