//! The device side of Emissary calls (issue 14) against a mock host: the CUDA C stubs
//! (include/streamexec_mpi.h, kernels/emissary_mpi.cu, compiled to PTX) on the `cuda` platform
//! and the OpenCL C stubs (`MultiKernelLoaderSpec::with_mpi`, kernels/cl/emissary_mpi.cl) on
//! `opencl`. A raw handler at `OFFLOAD_EMISSARY` decodes every lane's argument buffer strictly by
//! the wire format, records it with the port's lane mask, and answers with values the tests
//! recognize; the tests compare the records with what each thread must have sent and the
//! kernels' outputs with what the stubs must do with the replies.
//!
//! No MPI runs: the mock plays the host dispatcher (and, for the seed example and Allreduce, the
//! other ranks, reading and writing the kernels' unified buffers as the real host side will).

#[path = "../common/mod.rs"]
mod common;
mod cuda;
mod opencl;
mod scenarios;

use std::sync::{Arc, Mutex, MutexGuard};

use streamexec::rpc::{Server, opcode};
use streamexec::{StreamExecutor, UnifiedMemory};

/// One argument record as the host decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rec {
    pub kind: u32,
    pub size: u32,
    pub value: u64,
}

/// A 4-byte value record of an `int` (sign-extended).
pub fn int(v: i64) -> Rec {
    Rec {
        kind: 0,
        size: 4,
        value: v as i32 as i64 as u64,
    }
}

/// A device-pointer record.
pub fn dptr(address: u64) -> Rec {
    Rec {
        kind: 1,
        size: 8,
        value: address,
    }
}

/// One lane's call, decoded.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub api: u32,
    pub function: u32,
    pub args: Vec<Rec>,
}

impl Call {
    /// An MPI (API 3) call.
    pub fn mpi(function: u32, args: Vec<Rec>) -> Call {
        Call {
            api: 3,
            function,
            args,
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Decodes a lane's buffer exactly as the spec says: a 16-byte header with flags 0, then
/// `argc` 16-byte records, and nothing else; kinds 0..=2, value sizes 1/2/4/8 with the value
/// extended to 64 bits, pointer sizes 8.
pub fn decode(b: &[u8]) -> Result<Call, String> {
    if b.len() < 16 {
        return Err(format!("{} bytes: shorter than the header", b.len()));
    }
    let (api, function, argc, flags) = (u32_at(b, 0), u32_at(b, 4), u32_at(b, 8), u32_at(b, 12));
    if flags != 0 {
        return Err(format!("flags {flags:#x}, not 0"));
    }
    if b.len() != 16 + 16 * argc as usize {
        return Err(format!("{} bytes for argc {argc}", b.len()));
    }
    let mut args = Vec::new();
    for k in 0..argc as usize {
        let at = 16 + 16 * k;
        let rec = Rec {
            kind: u32_at(b, at),
            size: u32_at(b, at + 4),
            value: u64::from_le_bytes(b[at + 8..at + 16].try_into().expect("8 bytes")),
        };
        let ok = match rec.kind {
            0 => matches!(rec.size, 1 | 2 | 4 | 8),
            1 | 2 => rec.size == 8,
            _ => false,
        };
        if !ok {
            return Err(format!("record {k}: {rec:?}"));
        }
        if rec.kind == 0 && rec.size < 8 {
            // The rest of the word is the extension of the low `size` bytes.
            let bits = 8 * rec.size;
            let low = rec.value & ((1u64 << bits) - 1);
            let sign = ((low as i64) << (64 - bits)) >> (64 - bits);
            if rec.value != low && rec.value != sign as u64 {
                return Err(format!(
                    "record {k}: {rec:?} is not extended from {bits} bits"
                ));
            }
        }
        args.push(rec);
    }
    Ok(Call {
        api,
        function,
        args,
    })
}

/// One served port: its lane mask and each active lane's decoded call.
#[derive(Clone, Debug)]
pub struct Trip {
    pub mask: u64,
    pub calls: Vec<(usize, Result<Call, String>)>,
}

/// What the mock answers a lane with.
pub type Responder = dyn Fn(usize, &Call) -> [u64; 8] + Send + Sync;

/// The mock host handler at `OFFLOAD_EMISSARY`, recording every port it serves.
#[derive(Clone, Default)]
pub struct Mock {
    trips: Arc<Mutex<Vec<Trip>>>,
}

impl Mock {
    /// Serves `OFFLOAD_EMISSARY` on `server` from now on (replacing any handler): a lane whose
    /// buffer does not decode gets status 3 (BAD_ARGUMENTS), the others `respond(lane, call)`.
    /// With `fail`, the handler records the calls and then fails (the server's error reply).
    pub fn install(server: &Server, fail: bool, respond: Arc<Responder>) -> Mock {
        let mock = Mock::default();
        let trips = mock.trips.clone();
        server.register(opcode::OFFLOAD_EMISSARY, move |port| {
            let mask = port.mask();
            let data = port.recv_n()?;
            let calls: Vec<_> = (0..port.lane_size())
                .filter(|l| mask >> l & 1 == 1)
                .map(|l| (l, decode(&data[l])))
                .collect();
            trips.lock().unwrap_or_else(|e| e.into_inner()).push(Trip {
                mask,
                calls: calls.clone(),
            });
            if fail {
                return Err(streamexec::rpc::Error::Rpc {
                    detail: "the mock Emissary host fails this call".into(),
                });
            }
            let mut replies = vec![[0u64; 8]; port.lane_size()];
            for (l, c) in &calls {
                replies[*l] = match c {
                    Ok(c) => respond(*l, c),
                    Err(_) => [3, 0, 0, 0, 0, 0, 0, 0],
                };
            }
            port.send(|l, p| *p = replies[l])
        });
        mock
    }

    /// The ports served so far, in order.
    pub fn trips(&self) -> Vec<Trip> {
        self.trips.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every lane's call, in serving order, with the trip's mask; panics on an undecodable one.
    pub fn calls(&self) -> Vec<(u64, usize, Call)> {
        let mut out = Vec::new();
        for t in self.trips() {
            for (lane, c) in t.calls {
                let c = c.unwrap_or_else(|e| panic!("lane {lane}: bad buffer: {e}"));
                out.push((t.mask, lane, c));
            }
        }
        out
    }
}

/// Where a kernel sees a unified buffer: the CUDA device pointer, or on OpenCL the SVM pointer,
/// which is the host address.
pub fn kernel_base<T: bytemuck::Pod>(exec: &StreamExecutor, m: &UnifiedMemory<T>) -> u64 {
    if exec.platform_name() == "opencl" {
        m.host_ptr() as u64
    } else {
        m.ptr().address().raw()
    }
}

/// A unified buffer the mock reads and writes by kernel address, as the host side will.
#[derive(Clone)]
pub struct View<T: bytemuck::Pod = i32> {
    pub mem: Arc<UnifiedMemory<T>>,
    pub base: u64,
}

impl<T: bytemuck::Pod> View<T> {
    pub fn new(exec: &StreamExecutor, len: usize, fill: T) -> View<T> {
        let mem = exec.allocate_unified::<T>(len).expect("allocate_unified");
        for i in 0..len {
            mem.store(i, fill);
        }
        let base = kernel_base(exec, &mem);
        View {
            mem: Arc::new(mem),
            base,
        }
    }
    fn index(&self, address: u64) -> usize {
        let size = std::mem::size_of::<T>() as u64;
        let off = address
            .checked_sub(self.base)
            .expect("address below the buffer");
        assert_eq!(off % size, 0, "unaligned address {address:#x}");
        (off / size) as usize
    }
    pub fn load(&self, address: u64) -> T {
        self.mem.load(self.index(address))
    }
    pub fn store(&self, address: u64, v: T) {
        self.mem.store(self.index(address), v)
    }
    pub fn to_vec(&self) -> Vec<T> {
        (0..self.mem.len()).map(|i| self.mem.load(i)).collect()
    }
}

/// The tests replace the executor's handler and read its error log: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Device 0 of `platform`, or `None` after a skip message (a failure when `STREAMEXEC_REQUIRE`
/// names it).
pub fn executor(platform: &str, test: &str) -> Option<StreamExecutor> {
    let required = common::required_platforms().iter().any(|p| p == platform);
    match streamexec::PlatformManager::platform_with_name(platform)
        .and_then(|p| p.executor_for_device(0))
    {
        Ok(e) => Some(e),
        Err(e) => {
            assert!(
                !required,
                "STREAMEXEC_REQUIRE names `{platform}` but it is unavailable: {e}"
            );
            eprintln!("{test}: skipping, the {platform} platform is unavailable: {e}");
            None
        }
    }
}
