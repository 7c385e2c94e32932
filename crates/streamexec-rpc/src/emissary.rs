//! The Emissary layer (after LLVM offload's Emissary APIs): a kernel calls a native host API
//! through one opcode, [`OFFLOAD_EMISSARY`](super::opcode::OFFLOAD_EMISSARY). Each lane sends
//! one argument buffer (API id, function index, then each argument with its kind and size;
//! [`encode`] / [`decode`], format below); the host dispatcher finds the API's
//! table ([`EmissaryApi`], registered with `Server::register_emissary`), calls the wrapper,
//! and answers each lane with one packet: a status, a return value and up to six out values
//! ([`EmissaryReply`]). A whole warp is one port round trip.
//!
//! Pointer arguments name device memory the wrapper reaches through the server's
//! [`EmissaryMemory`] (an executor's server resolves them against its live allocations, in
//! place where the host can address them, staged by copies otherwise); a standalone server
//! refuses them.
//!
//! ## Wire format
//!
//! **One call is one port round trip per warp:** the warp opens a port, every active lane sends its
//! own buffer with `send_n` (sizes may differ), the host answers every lane with one packet
//! (`recv`), close. Lanes are served in lane order.
//!
//! **Argument buffer** (little-endian, per lane; exactly `16 + 16 * argc` bytes):
//!
//! | offset | field |
//! |---|---|
//! | 0 | `u32` API id (0 invalid) |
//! | 4 | `u32` function index (0 invalid) |
//! | 8 | `u32` argument count (at most 32) |
//! | 12 | `u32` flags (0) |
//! | 16 + 16k | argument k: `u32` kind (0 value, 1 device pointer, 2 host pointer), `u32` size (1, 2, 4 or 8 for a value, extended to 64 bits by the sender; 8 for a pointer), `u64` value or address |
//!
//! **Reply** (one 64-byte packet per lane): word 0 the status (0 OK, 1 unknown API, 2 unknown
//! function, 3 bad arguments: malformed buffer or wrong count/kind/size, 4 bad pointer, 5 the
//! wrapper failed), word 1 the return value, words 2..8 up to six out values. A nonzero status
//! means the wrapper did not run or failed; the reason is logged (`Server::take_errors`). Small
//! out-parameters (a rank, a request handle, a status) come back as out values and the stub stores
//! them, so they may live in registers or local memory.
//!
//! **Pointers** (`EmissaryMemory`, installed by the executor's server,
//! `executor_rpc/emissary_memory.rs`): a device pointer must lie inside a live allocation of the
//! executor, found by its device address or, for unified memory, by its host address (what an
//! OpenCL kernel sees for SVM). The allocation is pinned for the call (or, for `MPI_Isend`/
//! `MPI_Irecv`, until `MPI_Wait`), so a host free meanwhile cannot pull it away. Memory the host
//! can address is used **in place**: the host platform's device memory (`host_view`) and unified
//! memory. Other device memory (CUDA device memory, OpenCL buffers) is **staged**: copied to the
//! host when the wrapper takes it (`memcpy_d2h_sync`) and back when it writes back after a receive.
//! Host pointers are refused for now. A standalone `Server` refuses every pointer. OpenCL buffer
//! pointers as a kernel sees them are not addresses streamexec knows (its OpenCL device addresses
//! are handles), so OpenCL kernels pass unified (SVM) memory to emissary calls.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::port::{Handler, Port};
use crate::error::{Error, Result};

/// LLVM's Emissary API ids (`EmissaryIds.h`): the MPI API.
pub const EMISSARY_API_MPI: u32 = 3;
/// Bytes before the first argument record: api, function, argument count, flags.
pub const EMISSARY_HEADER_BYTES: usize = 16;
/// Bytes of one argument record: kind, size, value.
pub const EMISSARY_ARG_BYTES: usize = 16;
/// The most arguments one call may carry.
pub const EMISSARY_MAX_ARGS: usize = 32;

/// The status word of an emissary reply (`data[0]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum EmissaryStatus {
    /// The wrapper ran; `data[1]` is its return value.
    Ok = 0,
    /// No API is registered under the call's API id.
    UnknownApi = 1,
    /// The API has no function at the call's index.
    UnknownFunction = 2,
    /// The buffer is malformed, or an argument has the wrong count, kind or size.
    BadArguments = 3,
    /// A pointer argument is not inside a live allocation of the executor.
    BadPointer = 4,
    /// The wrapper failed (its message is in the server's log).
    HostError = 5,
}

impl EmissaryStatus {
    /// The status of a reply word; `None` for a value no server sends.
    pub fn from_word(w: u64) -> Option<Self> {
        use EmissaryStatus::*;
        [
            Ok,
            UnknownApi,
            UnknownFunction,
            BadArguments,
            BadPointer,
            HostError,
        ]
        .into_iter()
        .find(|s| *s as u64 == w)
    }
}

/// One argument of an emissary call, as the device sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmissaryArg {
    /// A value of `size` bytes (1, 2, 4 or 8), extended to 64 bits by the sender.
    Value {
        /// Its size in bytes.
        size: u32,
        /// The value.
        bits: u64,
    },
    /// An address in the executor's device memory (a kernel's pointer).
    Device(u64),
    /// An address in host memory.
    Host(u64),
}

impl EmissaryArg {
    const VALUE: u32 = 0;
    const DEVICE: u32 = 1;
    const HOST: u32 = 2;

    /// A 4-byte signed value (counts, ranks, tags, handles).
    pub fn i32(v: i32) -> Self {
        EmissaryArg::Value {
            size: 4,
            bits: v as i64 as u64,
        }
    }

    /// An 8-byte value.
    pub fn u64(v: u64) -> Self {
        EmissaryArg::Value { size: 8, bits: v }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            EmissaryArg::Value { .. } => "a value",
            EmissaryArg::Device(_) => "a device pointer",
            EmissaryArg::Host(_) => "a host pointer",
        }
    }
}

/// The argument buffer of one lane's call (what a device stub builds).
pub fn encode(api: u32, function: u32, args: &[EmissaryArg]) -> Vec<u8> {
    let mut out = Vec::with_capacity(EMISSARY_HEADER_BYTES + EMISSARY_ARG_BYTES * args.len());
    for w in [api, function, args.len() as u32, 0] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for a in args {
        let (kind, size, value) = match *a {
            EmissaryArg::Value { size, bits } => (EmissaryArg::VALUE, size, bits),
            EmissaryArg::Device(p) => (EmissaryArg::DEVICE, 8, p),
            EmissaryArg::Host(p) => (EmissaryArg::HOST, 8, p),
        };
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) // ok: callers checked the length
}

/// Parses one lane's argument buffer: (api, function, arguments), or what is wrong with it.
pub fn decode(bytes: &[u8]) -> std::result::Result<(u32, u32, Vec<EmissaryArg>), String> {
    if bytes.len() < EMISSARY_HEADER_BYTES {
        return Err(format!(
            "the argument buffer has {} bytes, fewer than its {EMISSARY_HEADER_BYTES}-byte header",
            bytes.len()
        ));
    }
    let (api, function, argc) = (u32_at(bytes, 0), u32_at(bytes, 4), u32_at(bytes, 8));
    if argc as usize > EMISSARY_MAX_ARGS {
        return Err(format!(
            "the buffer says {argc} arguments; at most {EMISSARY_MAX_ARGS} are allowed"
        ));
    }
    let want = EMISSARY_HEADER_BYTES + EMISSARY_ARG_BYTES * argc as usize;
    if bytes.len() != want {
        return Err(format!(
            "the argument buffer has {} bytes; its header says {argc} arguments, which take {want}",
            bytes.len()
        ));
    }
    let mut args = Vec::with_capacity(argc as usize);
    for k in 0..argc as usize {
        let at = EMISSARY_HEADER_BYTES + EMISSARY_ARG_BYTES * k;
        let (kind, size) = (u32_at(bytes, at), u32_at(bytes, at + 4));
        let value = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8 bytes")); // ok: length checked above
        args.push(match (kind, size) {
            (EmissaryArg::VALUE, 1 | 2 | 4 | 8) => EmissaryArg::Value { size, bits: value },
            (EmissaryArg::DEVICE, 8) => EmissaryArg::Device(value),
            (EmissaryArg::HOST, 8) => EmissaryArg::Host(value),
            _ => {
                return Err(format!(
                    "argument {k} has kind {kind} and size {size}; kinds are 0 (value: 1, 2, 4 \
                     or 8 bytes), 1 (device pointer) and 2 (host pointer), pointers 8 bytes"
                ));
            }
        });
    }
    Ok((api, function, args))
}

/// What a wrapper answers: the function's return value and up to six out values
/// (reply words 2..8), which the device stub stores into its out-parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmissaryReply {
    /// The return value (an MPI return code, say).
    pub ret: i64,
    /// Function-specific out values.
    pub outs: [u64; 6],
}

impl EmissaryReply {
    /// A reply with return value `ret` and no out values.
    pub fn ret(ret: i64) -> Self {
        EmissaryReply { ret, outs: [0; 6] }
    }

    /// The reply packet (status `Ok`).
    pub fn to_words(self) -> [u64; 8] {
        let mut w = [0u64; 8];
        w[1] = self.ret as u64;
        w[2..].copy_from_slice(&self.outs);
        w
    }
}

/// Host bytes a wrapper hands to the host API for a pointer argument: the device memory itself
/// where the host can address it, or a staged copy that [`write_back`](Self::write_back)
/// copies to the device.
pub struct HostBuffer {
    ptr: *mut u8,
    len: usize,
    staged: Option<(Vec<u8>, StagedWriteBack)>,
    /// Keeps in-place memory (or the allocation a staged copy goes back to) alive.
    _keep: Box<dyn Send + Sync>,
}

type StagedWriteBack = Box<dyn FnOnce(&[u8]) -> Result<()> + Send>;

// SAFETY: `ptr` is either into `staged`'s Vec (owned) or into memory `_keep` keeps alive; it is
// only handed out as a raw pointer, and the owner of the memory (a kernel waiting for this
// call) does not free it meanwhile.
unsafe impl Send for HostBuffer {}
// SAFETY: as above; `&HostBuffer` gives out only the raw pointer.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// `len` bytes at `ptr`, used in place while `keep` lives.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must stay valid for reads and writes while `keep` lives.
    pub unsafe fn in_place(ptr: *mut u8, len: usize, keep: Box<dyn Send + Sync>) -> Self {
        HostBuffer {
            ptr,
            len,
            staged: None,
            _keep: keep,
        }
    }

    /// A staged copy holding `data` (the device bytes, copied in); `write_back` copies the
    /// bytes out again when the wrapper calls [`write_back`](Self::write_back).
    pub fn staged(
        mut data: Vec<u8>,
        write_back: impl FnOnce(&[u8]) -> Result<()> + Send + 'static,
        keep: Box<dyn Send + Sync>,
    ) -> Self {
        HostBuffer {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            staged: Some((data, Box::new(write_back))),
            _keep: keep,
        }
    }

    /// The first byte: valid for `len` bytes of reads and writes while `self` lives.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when it is the device memory itself.
    pub fn is_in_place(&self) -> bool {
        self.staged.is_none()
    }

    /// After the host API wrote into it: copies a staged buffer back to the device (nothing
    /// to do in place).
    pub fn write_back(self) -> Result<()> {
        match self.staged {
            Some((data, back)) => back(&data),
            None => Ok(()),
        }
    }
}

/// Resolves pointer arguments to host bytes. An executor's server installs one over its live
/// allocations (`crate::executor_rpc`); a standalone server's refuses every pointer.
pub trait EmissaryMemory: Send + Sync {
    /// `bytes` bytes at the pointer `arg` (a [`EmissaryArg::Device`] or [`EmissaryArg::Host`]),
    /// or why they are not memory the call may use.
    fn buffer(&self, arg: EmissaryArg, bytes: u64) -> Result<HostBuffer>;
}

struct NoMemory;

impl EmissaryMemory for NoMemory {
    fn buffer(&self, arg: EmissaryArg, _bytes: u64) -> Result<HostBuffer> {
        Err(Error::Rpc {
            detail: format!(
                "{arg:?}: a standalone rpc::Server resolves no pointers; pointer arguments need \
                 an executor's server (StreamExecutor::rpc) or Server::set_emissary_memory"
            ),
        })
    }
}

/// One lane's call as a wrapper sees it: typed access to its arguments.
pub struct EmissaryCall<'a> {
    api: &'a str,
    function: &'a str,
    lane: usize,
    args: &'a [EmissaryArg],
    memory: &'a dyn EmissaryMemory,
}

impl EmissaryCall<'_> {
    /// The lane that made the call.
    pub fn lane(&self) -> usize {
        self.lane
    }

    /// All arguments.
    pub fn args(&self) -> &[EmissaryArg] {
        self.args
    }

    fn bad(&self, status: EmissaryStatus, detail: String) -> Error {
        Error::Emissary {
            api: self.api.to_string(),
            function: self.function.to_string(),
            lane: self.lane,
            status: status as u64,
            detail,
        }
    }

    fn arg(&self, i: usize) -> Result<EmissaryArg> {
        self.args.get(i).copied().ok_or_else(|| {
            self.bad(
                EmissaryStatus::BadArguments,
                format!(
                    "argument {i} is missing: the call has {} arguments",
                    self.args.len()
                ),
            )
        })
    }

    /// Value argument `i` as a 4-byte signed integer.
    pub fn i32(&self, i: usize) -> Result<i32> {
        match self.arg(i)? {
            EmissaryArg::Value { size: 4, bits } => Ok(bits as u32 as i32),
            a => Err(self.wrong(i, a, "a 4-byte value")),
        }
    }

    /// Value argument `i` as an 8-byte integer.
    pub fn u64(&self, i: usize) -> Result<u64> {
        match self.arg(i)? {
            EmissaryArg::Value { size: 8, bits } => Ok(bits),
            a => Err(self.wrong(i, a, "an 8-byte value")),
        }
    }

    /// Pointer argument `i` (device or host), as sent.
    pub fn pointer(&self, i: usize) -> Result<EmissaryArg> {
        match self.arg(i)? {
            a @ (EmissaryArg::Device(_) | EmissaryArg::Host(_)) => Ok(a),
            a => Err(self.wrong(i, a, "a pointer")),
        }
    }

    /// The address of pointer argument `i`.
    pub fn address(&self, i: usize) -> Result<u64> {
        match self.pointer(i)? {
            EmissaryArg::Device(p) | EmissaryArg::Host(p) => Ok(p),
            EmissaryArg::Value { .. } => unreachable!("pointer() returns pointers"), // ok: checked just above
        }
    }

    /// `bytes` bytes at pointer argument `i`, in place or staged (see [`HostBuffer`]).
    pub fn buffer(&self, i: usize, bytes: u64) -> Result<HostBuffer> {
        let p = self.pointer(i)?;
        self.memory
            .buffer(p, bytes)
            .map_err(|e| self.bad(EmissaryStatus::BadPointer, format!("argument {i}: {e}")))
    }

    fn wrong(&self, i: usize, got: EmissaryArg, want: &str) -> Error {
        let got = match got {
            EmissaryArg::Value { size, .. } => format!("a {size}-byte value"),
            a => a.kind_name().to_string(),
        };
        self.bad(
            EmissaryStatus::BadArguments,
            format!("argument {i} is {got}; this function takes {want} there"),
        )
    }
}

/// A host wrapper: serves one lane's call.
pub type EmissaryFn = Arc<dyn Fn(&EmissaryCall<'_>) -> Result<EmissaryReply> + Send + Sync>;

struct Function {
    name: String,
    arity: usize,
    call: EmissaryFn,
}

/// One host API's table of wrappers, keyed by function index.
pub struct EmissaryApi {
    id: u32,
    name: String,
    functions: HashMap<u32, Function>,
}

impl EmissaryApi {
    /// An empty table for API `id` (`name` is for messages).
    pub fn new(id: u32, name: impl Into<String>) -> Self {
        EmissaryApi {
            id,
            name: name.into(),
            functions: HashMap::new(),
        }
    }

    /// Adds function `index` (`name`, taking exactly `arity` arguments), served by `call`.
    pub fn function(
        mut self,
        index: u32,
        name: impl Into<String>,
        arity: usize,
        call: impl Fn(&EmissaryCall<'_>) -> Result<EmissaryReply> + Send + Sync + 'static,
    ) -> Self {
        let f = Function {
            name: name.into(),
            arity,
            call: Arc::new(call),
        };
        self.functions.insert(index, f);
        self
    }

    /// Its id.
    pub fn id(&self) -> u32 {
        self.id
    }

    fn check(&self) -> Result<()> {
        let bad = |detail: String| Error::invalid("rpc::Server::register_emissary", detail);
        if self.id == 0 {
            return Err(bad(format!(
                "API `{}` has id 0, which the Emissary ids reserve as invalid",
                self.name
            )));
        }
        if let Some(f) = self.functions.get(&0) {
            return Err(bad(format!(
                "`{}` of API `{}` has index 0, which is reserved as invalid",
                f.name, self.name
            )));
        }
        match self
            .functions
            .values()
            .find(|f| f.arity > EMISSARY_MAX_ARGS)
        {
            Some(f) => Err(bad(format!(
                "`{}` takes {} arguments; a call carries at most {EMISSARY_MAX_ARGS}",
                f.name, f.arity
            ))),
            None => Ok(()),
        }
    }
}

/// The server's emissary state: registered APIs, the pointer resolver, and the errors it
/// answered since the last `take_errors`.
pub(crate) struct Dispatcher {
    apis: RwLock<HashMap<u32, Arc<EmissaryApi>>>,
    memory: RwLock<Arc<dyn EmissaryMemory>>,
    errors: Mutex<Vec<String>>,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Dispatcher {
            apis: RwLock::default(),
            memory: RwLock::new(Arc::new(NoMemory)),
            errors: Mutex::default(),
        }
    }
}

impl Dispatcher {
    /// Registers `api`, replacing an earlier table with its id.
    pub(crate) fn register(&self, api: EmissaryApi) -> Result<()> {
        api.check()?;
        self.apis.write().insert(api.id, Arc::new(api));
        Ok(())
    }

    /// Resolves pointer arguments with `memory` from now on.
    pub(crate) fn set_memory(&self, memory: Arc<dyn EmissaryMemory>) {
        *self.memory.write() = memory;
    }

    /// Errors answered since the last call.
    pub(crate) fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.errors.lock())
    }

    /// Serves one lane's buffer: the reply packet.
    pub(crate) fn serve_lane(&self, lane: usize, bytes: &[u8]) -> [u64; 8] {
        let fail = |status: EmissaryStatus, msg: String| {
            eprintln!("streamexec emissary: {msg}");
            let mut e = self.errors.lock();
            if e.len() < 1024 {
                e.push(msg);
            }
            let mut w = [0u64; 8];
            w[0] = status as u64;
            w
        };
        let (api_id, index, args) = match decode(bytes) {
            Ok(d) => d,
            Err(why) => return fail(EmissaryStatus::BadArguments, format!("lane {lane}: {why}")),
        };
        let Some(api) = self.apis.read().get(&api_id).cloned() else {
            return fail(
                EmissaryStatus::UnknownApi,
                format!(
                    "lane {lane} called API {api_id} (function {index}), which no table is \
                     registered for (Server::register_emissary)"
                ),
            );
        };
        let Some(f) = api.functions.get(&index) else {
            return fail(
                EmissaryStatus::UnknownFunction,
                format!(
                    "lane {lane} called function {index} of API `{}` ({api_id}), which it does \
                     not have",
                    api.name
                ),
            );
        };
        if args.len() != f.arity {
            return fail(
                EmissaryStatus::BadArguments,
                format!(
                    "lane {lane}: `{}` of API `{}` takes {} arguments; the call sent {}",
                    f.name,
                    api.name,
                    f.arity,
                    args.len()
                ),
            );
        }
        let memory = self.memory.read().clone();
        let call = EmissaryCall {
            api: &api.name,
            function: &f.name,
            lane,
            args: &args,
            memory: &*memory,
        };
        match (f.call)(&call) {
            Ok(reply) => reply.to_words(),
            Err(e) => {
                let status = match &e {
                    Error::Emissary { status, .. } => {
                        EmissaryStatus::from_word(*status).unwrap_or(EmissaryStatus::HostError)
                    }
                    _ => EmissaryStatus::HostError,
                };
                let msg = match &e {
                    Error::Emissary { .. } => e.to_string(),
                    _ => format!("lane {lane}: `{}` of API `{}`: {e}", f.name, api.name),
                };
                fail(status, msg)
            }
        }
    }
}

/// The handler of `OFFLOAD_EMISSARY`: every active lane's buffer in one `send_n`, one reply
/// packet per lane.
pub(crate) fn handler(d: Arc<Dispatcher>) -> Handler {
    Arc::new(move |port: &mut Port<'_>| {
        let buffers = port.recv_n()?;
        let mask = port.mask();
        let replies: Vec<[u64; 8]> = (0..buffers.len())
            .map(|l| {
                if mask >> l & 1 == 1 {
                    d.serve_lane(l, &buffers[l])
                } else {
                    [0; 8]
                }
            })
            .collect();
        port.send(|l, p| *p = replies[l])
    })
}

#[cfg(test)]
mod tests;
