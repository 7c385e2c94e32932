//! The functions a launcher serves (`vprintf`, `__assertfail`, `malloc`, `free`) on both
//! engines, through the crate's own launch API and `kernels/services.cu` (clang at -O0 and
//! -O3): what the service sees is checked against the values the test passed.

use std::sync::Arc;

use parking_lot::Mutex;
use streamexec_ptx::{
    AllocTable, Arg, DeviceHeap, DeviceServices, DeviceView, Dim3, Error, LaunchConfig, Module,
    PtxEngine, ThreadPlace,
};
use streamexec_test_support::rand::RngExt;
use streamexec_test_support::rng;

const PTX: [&str; 2] = [
    include_str!("../../../kernels/ptx/services.O0.ptx"),
    include_str!("../../../kernels/ptx/services.O3.ptx"),
];
const ENGINES: [PtxEngine; 2] = [PtxEngine::Interpreter, PtxEngine::Jit];

/// One `vprintf` call as the service saw it.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    format: String,
    args: u64,
    place: ThreadPlace,
    /// `print_values`' arguments read through the view: i, d, s, l, u, c.
    values: Option<(i32, f64, String, i64, u32, i32)>,
}

struct Recorder {
    seen: Mutex<Vec<Seen>>,
    heap: DeviceHeap,
}

fn word32(view: &dyn DeviceView, addr: u64) -> u32 {
    let mut b = [0u8; 4];
    view.read(addr, &mut b).expect("readable argument");
    u32::from_le_bytes(b)
}

fn word(view: &dyn DeviceView, addr: u64) -> u64 {
    let mut b = [0u8; 8];
    view.read(addr, &mut b).expect("readable argument");
    u64::from_le_bytes(b)
}

impl DeviceServices for Recorder {
    fn vprintf(&self, format: &[u8], args: u64, view: &dyn DeviceView, place: ThreadPlace) -> i32 {
        let format = String::from_utf8(format.to_vec()).unwrap();
        let values = format.starts_with("i=").then(|| {
            let s = view.read_c_string(word(view, args + 16)).unwrap();
            (
                word32(view, args) as i32,
                f64::from_bits(word(view, args + 8)),
                String::from_utf8(s).unwrap(),
                word(view, args + 24) as i64,
                word32(view, args + 32),
                word32(view, args + 36) as i32,
            )
        });
        let n = format.matches('%').count() as i32;
        self.seen.lock().push(Seen {
            format,
            args,
            place,
            values,
        });
        n
    }
    fn malloc(&self, bytes: u64) -> u64 {
        self.heap.malloc(bytes)
    }
    fn free(&self, addr: u64) {
        self.heap.free(addr);
    }
}

struct Setup {
    table: Arc<AllocTable>,
    pool: rayon::ThreadPool,
    services: Arc<Recorder>,
}

fn setup(heap_limit: u64) -> Setup {
    let table = Arc::new(AllocTable::default());
    Setup {
        pool: rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
        services: Arc::new(Recorder {
            seen: Mutex::new(Vec::new()),
            heap: DeviceHeap::new(table.clone(), heap_limit),
        }),
        table,
    }
}

impl Setup {
    fn alloc(&self, bytes: &[u8]) -> u64 {
        let a = self.table.allocate(bytes.len() as u64).unwrap();
        self.table.write(a, bytes).unwrap();
        a
    }
    fn pin(&self, addr: u64) -> Arg<'static> {
        Arg::Pointer(self.table.resolve_whole(addr, 1).unwrap())
    }
    fn run(
        &self,
        module: &Arc<Module>,
        name: &str,
        engine: PtxEngine,
        grid: u32,
        block: u32,
        args: &[Arg<'_>],
    ) -> Result<(), Error> {
        let config = LaunchConfig {
            grid: Dim3::new(grid, 1, 1),
            block: Dim3::new(block, 1, 1),
            engine,
            ..LaunchConfig::default()
        };
        let k = module.kernel(name).unwrap();
        k.prepare(&config, args)?
            .with_services(self.services.clone())
            .run(&self.pool)
    }
}

#[test]
fn vprintf_passes_its_format_arguments_and_thread_to_the_service() {
    let mut r = rng(module_path!());
    for ptx in PTX {
        for engine in ENGINES {
            let s = setup(DeviceHeap::DEFAULT_LIMIT);
            let m = Module::load(ptx, &s.table).unwrap();
            let (i, d, l, u) = (
                r.random::<i32>() / 2,
                r.random::<f64>() * 1e3,
                r.random::<i64>(),
                r.random::<u32>(),
            );
            let text: String = (0..1 + r.random_range(0..20))
                .map(|_| r.random_range(b'a'..=b'z') as char)
                .collect();
            let sa = s.alloc(format!("{text}\0").as_bytes());
            let args = [
                Arg::Scalar(&i.to_le_bytes()),
                Arg::Scalar(&d.to_le_bytes()),
                Arg::Scalar(&l.to_le_bytes()),
                Arg::Scalar(&u.to_le_bytes()),
                s.pin(sa),
            ];
            let (grid, block) = (2u32, 3u32);
            s.run(&m, "print_values", engine, grid, block, &args)
                .unwrap();
            let mut seen = s.services.seen.lock().clone();
            seen.sort_by_key(|x| (x.place.block.x, x.place.thread.x));
            assert_eq!(seen.len(), (grid * block) as usize, "{engine:?}");
            for (k, x) in seen.iter().enumerate() {
                let (b, t) = (k as u32 / block, k as u32 % block);
                assert_eq!(x.format, "i=%d d=%.3f s=%s l=%lld u=%u c=%c\n");
                assert_eq!(x.place.block, Dim3::new(b, 0, 0));
                assert_eq!(x.place.thread, Dim3::new(t, 0, 0));
                // The argument buffer is the thread's local memory (a generic address).
                assert!(x.args >= 0xB000_0000_0000_0000, "{:#x}", x.args);
                assert_eq!(
                    x.values,
                    Some((i + t as i32, d, text.clone(), l, u, 'A' as i32 + t as i32)),
                    "{engine:?} block {b} thread {t}"
                );
            }
        }
    }
}

#[test]
fn vprintf_returns_what_the_service_returns_and_minus_one_without_services() {
    for ptx in PTX {
        for engine in ENGINES {
            let s = setup(DeviceHeap::DEFAULT_LIMIT);
            let m = Module::load(ptx, &s.table).unwrap();
            let out = s.alloc(&[0xAB; 8]);
            s.run(&m, "print_count", engine, 1, 1, &[s.pin(out)])
                .unwrap();
            let mut v = [0u8; 8];
            s.table.read(out, &mut v).unwrap();
            assert_eq!(v, [3, 0, 0, 0, 0, 0, 0, 0], "{engine:?}");
            // Without services: -1 for both calls.
            let config = LaunchConfig {
                engine,
                ..LaunchConfig::default()
            };
            m.kernel("print_count")
                .unwrap()
                .launch(&s.pool, &config, &[s.pin(out)])
                .unwrap();
            s.table.read(out, &mut v).unwrap();
            assert_eq!(v, [0xFF; 8], "{engine:?}");
        }
    }
}

#[test]
fn assertfail_fails_the_launch_with_cudas_text_and_the_thread() {
    let mut r = rng(module_path!());
    for ptx in PTX {
        for engine in ENGINES {
            let s = setup(DeviceHeap::DEFAULT_LIMIT);
            let m = Module::load(ptx, &s.table).unwrap();
            let (grid, block) = (3u32, 4u32);
            let (bad, bad_block) = (r.random_range(0..block), r.random_range(0..grid));
            let out = s.alloc(&vec![0u8; 4 * (grid * block) as usize]);
            let args = [
                Arg::Scalar(&(bad as i32).to_le_bytes()),
                Arg::Scalar(&(bad_block as i32).to_le_bytes()),
                s.pin(out),
            ];
            let e = s
                .run(&m, "assert_thread", engine, grid, block, &args)
                .unwrap_err();
            let Error::Assert { kernel, failure } = &e else {
                panic!("{engine:?}: {e}");
            };
            assert_eq!(kernel, "assert_thread");
            assert_eq!(
                (
                    failure.message.as_str(),
                    failure.file.as_str(),
                    failure.line
                ),
                ("x != bad", "services.cu", 42)
            );
            assert_eq!(failure.function, "assert_thread");
            assert_eq!(failure.block, Dim3::new(bad_block, 0, 0));
            assert_eq!(failure.thread, Dim3::new(bad, 0, 0));
            assert_eq!(
                failure.to_string(),
                format!(
                    "services.cu:42: assert_thread: block: [{bad_block},0,0], thread: \
                     [{bad},0,0] Assertion `x != bad` failed."
                )
            );
            // Nothing asserts when `bad` names no thread.
            let args = [
                Arg::Scalar(&(-1i32).to_le_bytes()),
                Arg::Scalar(&0i32.to_le_bytes()),
                s.pin(out),
            ];
            s.run(&m, "assert_thread", engine, grid, block, &args)
                .unwrap();
        }
    }
}

#[test]
fn malloc_memory_outlives_its_launch_and_the_heap_limit_holds() {
    for ptx in PTX {
        for engine in ENGINES {
            // Room for 3 blocks of 64 bytes, 5 threads ask.
            let s = setup(3 * 64 + 10);
            let m = Module::load(ptx, &s.table).unwrap();
            let n = 64u64;
            let ptrs = s.alloc(&[0xCD; 5 * 8]);
            s.run(
                &m,
                "heap_alloc",
                engine,
                1,
                5,
                &[Arg::Scalar(&n.to_le_bytes()), s.pin(ptrs)],
            )
            .unwrap();
            let mut raw = [0u8; 40];
            s.table.read(ptrs, &mut raw).unwrap();
            let p: Vec<u64> = raw
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let live: Vec<usize> = (0..5).filter(|&t| p[t] != 0).collect();
            assert_eq!(live.len(), 3, "{engine:?}: {p:x?}");
            assert_eq!(s.services.heap.used(), 3 * n);
            // A later launch reads them (only the live ones) and frees them.
            let compact: Vec<u8> = live.iter().flat_map(|&t| p[t].to_le_bytes()).collect();
            let ins = s.alloc(&compact);
            let vals = s.alloc(&[0xEE; 3 * 8]);
            s.run(
                &m,
                "heap_free",
                engine,
                1,
                3,
                &[s.pin(ins), Arg::Scalar(&n.to_le_bytes()), s.pin(vals)],
            )
            .unwrap();
            let mut v = [0u8; 24];
            s.table.read(vals, &mut v).unwrap();
            let v: Vec<i32> = v
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let want: Vec<i32> = live.iter().flat_map(|&t| [t as i32, 7]).collect();
            assert_eq!(v, want, "{engine:?}");
            assert_eq!(s.services.heap.used(), 0);
            assert!(s.table.read(p[live[0]], &mut [0u8; 4]).is_none(), "freed");
        }
    }
}

const HEAD: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";

#[test]
fn a_served_call_with_the_wrong_signature_is_refused_at_load_naming_the_line() {
    let table = Arc::new(AllocTable::default());
    // vprintf with one argument (line 6).
    let text = format!(
        "{HEAD}.extern .func (.param .b32 r) vprintf(.param .b64 f);\n\
         .visible .entry k()\n{{\n\t.param .b64 p0;\n\t.param .b32 r0;\n\
         \tcall.uni (r0), vprintf, (p0);\n\tret;\n}}\n"
    );
    match Module::load(&text, &table) {
        Err(Error::Ptx(e)) => {
            assert_eq!(e.line(), Some(9), "{e}");
            assert!(
                e.message().contains("vprintf") && e.message().contains("2 argument"),
                "{e}"
            );
        }
        other => panic!("{:?}", other.err()),
    }
    // A 4-byte parameter where malloc takes 8.
    let text = format!(
        "{HEAD}.extern .func (.param .b64 r) malloc(.param .b64 n);\n\
         .visible .entry k()\n{{\n\t.param .b32 p0;\n\t.param .b64 r0;\n\
         \tcall.uni (r0), malloc, (p0);\n\tret;\n}}\n"
    );
    match Module::load(&text, &table) {
        Err(Error::Ptx(e)) => assert!(e.message().contains("`p0` has 4 bytes"), "{e}"),
        other => panic!("{:?}", other.err()),
    }
}

/// A module that defines its own `malloc` calls it, not the served one.
#[test]
fn a_module_defining_malloc_calls_its_own() {
    let text = format!(
        "{HEAD}.func (.param .b64 r) malloc(.param .b64 n)\n{{\n\t.reg .b64 %x;\n\
         \tld.param.b64 %x, [n];\n\tadd.u64 %x, %x, 1000;\n\tst.param.b64 [r], %x;\n\tret;\n}}\n\
         .visible .entry k(.param .u64 out)\n{{\n\t.reg .b64 %o<3>;\n\tld.param.u64 %o1, [out];\n\
         \t{{\n\t.param .b64 p0;\n\tst.param.b64 [p0], 24;\n\t.param .b64 r0;\n\
         \tcall.uni (r0), malloc, (p0);\n\tld.param.b64 %o2, [r0];\n\t}}\n\
         \tst.global.u64 [%o1], %o2;\n\tret;\n}}\n"
    );
    for engine in ENGINES {
        let s = setup(DeviceHeap::DEFAULT_LIMIT);
        let m = Module::load(&text, &s.table).unwrap();
        let out = s.alloc(&[0xAB; 8]);
        s.run(&m, "k", engine, 1, 1, &[s.pin(out)]).unwrap();
        let mut v = [0u8; 8];
        s.table.read(out, &mut v).unwrap();
        assert_eq!(u64::from_le_bytes(v), 1024, "{engine:?}");
        assert_eq!(s.services.heap.used(), 0);
    }
}

/// A format pointer outside device memory is a fault of the calling thread on both engines.
#[test]
fn a_bad_format_pointer_is_a_fault_naming_vprintf() {
    let text = format!(
        "{HEAD}.extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n\
         .visible .entry k()\n{{\n\t.param .b64 p0;\n\tst.param.b64 [p0], 16;\n\
         \t.param .b64 p1;\n\tst.param.b64 [p1], 0;\n\t.param .b32 r0;\n\
         \tcall.uni (r0), vprintf, (p0, p1);\n\tret;\n}}\n"
    );
    for engine in ENGINES {
        let s = setup(DeviceHeap::DEFAULT_LIMIT);
        let m = Module::load(&text, &s.table).unwrap();
        match s.run(&m, "k", engine, 1, 2, &[]) {
            Err(Error::Fault { detail, .. }) => assert!(
                detail.contains("vprintf's format string")
                    && detail.contains("call.uni")
                    && detail.contains("thread (0, 0, 0)"),
                "{engine:?}: {detail}"
            ),
            other => panic!("{engine:?}: {other:?}"),
        }
        assert!(s.services.seen.lock().is_empty());
    }
}
