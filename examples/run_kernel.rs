//! A command-line kernel runner: loads one kernel from a PTX or OpenCL C file, builds its
//! arguments from the command line, launches it once and prints the `out:` buffers.
//!
//! ```text
//! run_kernel --platform NAME (--ptx FILE | --cl FILE) --kernel NAME --grid X[,Y[,Z]]
//!            --block X[,Y[,Z]] [--shared-bytes N] [--race-check] ARG...
//! ARG:  i32:V | u32:V | i64:V | u64:V | f32:V | f64:V          a scalar
//!       [out:]buf:T:N:INIT                                       N elements of T on the device
//! INIT: zero | iota (i) | fill:V | mod:K (i mod K)
//!       | lcg:SEED  x0 = SEED, x(k+1) = (1103515245 x(k) + 12345) mod 2^31, element i = x(i+1),
//!                   as x / 2^31 for floats and x mod 1000 for integers
//! ```
//!
//! After the run each `out:` buffer is printed, in argument order, as `argK: v0 v1 ...` (K is
//! the 0-based argument index; floats use Rust's `{}`). `--shared-bytes N` asks for N bytes of
//! dynamic shared memory per block: a launch attribute for PTX (`.extern .shared`), and for
//! OpenCL C a `__local` argument after the command-line ones (the kernel's last parameter).
//! Any error is printed on stderr and the exit status is 1 (2 for a malformed command line).
//! `--ptx` loads on the platforms that take PTX (host's PTX engine, cuda), `--cl` on opencl; a PTX
//! module that defines `__llvm_rpc_client` is an RPC launch, its output through the executor's
//! RPC server.

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;

use bytemuck::Pod;
use streamexec::{
    ArgList, BlockDim, DeviceMemory, MultiKernelLoaderSpec, PlatformManager, SharedMemory,
    StreamExecutor, ThreadDim,
};

const USAGE: &str = "usage: run_kernel --platform NAME (--ptx FILE | --cl FILE) --kernel NAME \
                     --grid X[,Y[,Z]] --block X[,Y[,Z]] [--shared-bytes N] [--race-check] ARG...\n\
                     ARG: i32:V u32:V i64:V u64:V f32:V f64:V | [out:]buf:T:N:INIT with INIT \
                     zero | iota | fill:V | mod:K | lcg:SEED";

/// Where the kernel comes from.
enum Source {
    Ptx(String),
    Cl(String),
}

/// How a buffer starts.
#[derive(Clone, Copy)]
enum Init<'a> {
    Zero,
    Iota,
    Fill(&'a str),
    Mod(u64),
    Lcg(u64),
}

/// One command-line kernel argument.
enum Arg<'a> {
    Scalar(&'a str, &'a str),
    Buffer {
        out: bool,
        ty: &'a str,
        len: usize,
        init: Init<'a>,
    },
}

struct Command<'a> {
    platform: &'a str,
    source: Source,
    kernel: &'a str,
    grid: BlockDim,
    block: ThreadDim,
    shared_bytes: Option<u64>,
    race_check: bool,
    args: Vec<Arg<'a>>,
}

fn parse_dims(flag: &str, text: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("{flag} `{text}`: expected X[,Y[,Z]]"));
    }
    let mut d = [1u32; 3];
    for (slot, p) in d.iter_mut().zip(&parts) {
        *slot = p
            .parse()
            .map_err(|_| format!("{flag} `{text}`: `{p}` is not a non-negative integer"))?;
    }
    Ok((d[0], d[1], d[2]))
}

fn parse_arg(text: &str) -> Result<Arg<'_>, String> {
    let (out, rest) = match text.strip_prefix("out:") {
        Some(r) => (true, r),
        None => (false, text),
    };
    let Some(buf) = rest.strip_prefix("buf:") else {
        if out {
            return Err(format!(
                "argument `{text}`: `out:` applies to buffers (out:buf:T:N:INIT)"
            ));
        }
        let (ty, value) = text
            .split_once(':')
            .ok_or_else(|| format!("argument `{text}`: expected T:V or [out:]buf:T:N:INIT"))?;
        check_type(text, ty)?;
        check_value(text, ty, value)?;
        return Ok(Arg::Scalar(ty, value));
    };
    let mut parts = buf.splitn(3, ':');
    let (ty, len, init) = match (parts.next(), parts.next(), parts.next()) {
        (Some(t), Some(n), Some(i)) => (t, n, i),
        _ => return Err(format!("argument `{text}`: expected [out:]buf:T:N:INIT")),
    };
    check_type(text, ty)?;
    let len: usize = len
        .parse()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("argument `{text}`: N = `{len}` is not a positive integer"))?;
    let number = |what: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("argument `{text}`: {what} `{v}` is not a non-negative integer"))
    };
    let init = match init.split_once(':') {
        None if init == "zero" => Init::Zero,
        None if init == "iota" => Init::Iota,
        Some(("fill", v)) => {
            check_value(text, ty, v)?;
            Init::Fill(v)
        }
        Some(("mod", k)) => match number("mod", k)? {
            0 => return Err(format!("argument `{text}`: mod:0 divides by zero")),
            k => Init::Mod(k),
        },
        Some(("lcg", s)) => Init::Lcg(number("lcg seed", s)?),
        _ => {
            return Err(format!(
                "argument `{text}`: unknown INIT `{init}` (zero, iota, fill:V, mod:K, lcg:SEED)"
            ));
        }
    };
    Ok(Arg::Buffer { out, ty, len, init })
}

fn check_type(text: &str, ty: &str) -> Result<(), String> {
    match ty {
        "i32" | "u32" | "i64" | "u64" | "f32" | "f64" => Ok(()),
        _ => Err(format!(
            "argument `{text}`: unknown type `{ty}` (i32, u32, i64, u64, f32, f64)"
        )),
    }
}

/// Fails unless `v` parses as a `ty` (checked before any device work).
fn check_value(text: &str, ty: &str, v: &str) -> Result<(), String> {
    let ok = match ty {
        "i32" => v.parse::<i32>().is_ok(),
        "u32" => v.parse::<u32>().is_ok(),
        "i64" => v.parse::<i64>().is_ok(),
        "u64" => v.parse::<u64>().is_ok(),
        "f32" => v.parse::<f32>().is_ok(),
        _ => v.parse::<f64>().is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "argument `{text}`: `{v}` is not a valid {ty} value"
        ))
    }
}

fn parse_command(args: &[String]) -> Result<Command<'_>, String> {
    let (mut platform, mut ptx, mut cl, mut kernel, mut grid, mut block) =
        (None, None, None, None, None, None);
    let (mut shared_bytes, mut race_check, mut rest) = (None, false, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .map(String::as_str)
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match a.as_str() {
            "--platform" => platform = Some(value("--platform")?),
            "--ptx" => ptx = Some(value("--ptx")?),
            "--cl" => cl = Some(value("--cl")?),
            "--kernel" => kernel = Some(value("--kernel")?),
            "--grid" => grid = Some(parse_dims("--grid", value("--grid")?)?),
            "--block" => block = Some(parse_dims("--block", value("--block")?)?),
            "--shared-bytes" => {
                let v = value("--shared-bytes")?;
                let n = v
                    .parse()
                    .map_err(|_| format!("--shared-bytes `{v}` is not a non-negative integer"))?;
                shared_bytes = Some(n);
            }
            "--race-check" => race_check = true,
            flag if flag.starts_with("--") => return Err(format!("unknown option `{flag}`")),
            arg => rest.push(parse_arg(arg)?),
        }
    }
    let source = match (ptx, cl) {
        (Some(p), None) => Source::Ptx(p.to_string()),
        (None, Some(c)) => Source::Cl(c.to_string()),
        (Some(_), Some(_)) => return Err("give one of --ptx and --cl, not both".into()),
        (None, None) => return Err("missing --ptx FILE or --cl FILE".into()),
    };
    Ok(Command {
        platform: platform.ok_or("missing --platform NAME")?,
        source,
        kernel: kernel.ok_or("missing --kernel NAME")?,
        grid: grid.ok_or("missing --grid X[,Y[,Z]]")?.into(),
        block: block.ok_or("missing --block X[,Y[,Z]]")?.into(),
        shared_bytes,
        race_check,
        args: rest,
    })
}

/// A buffer element type: parse, initialise, print.
trait Elem: Pod + Display + FromStr + Send + Sync {
    fn from_index(i: u64) -> Self;
    fn from_lcg(x: u64) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn from_index(i: u64) -> Self { i as $t }
            fn from_lcg(x: u64) -> Self { (x % 1000) as $t }
        }
    )*};
}
int_elem!(i32, u32, i64, u64);
impl Elem for f32 {
    fn from_index(i: u64) -> Self {
        i as f32
    }
    fn from_lcg(x: u64) -> Self {
        (x as f64 / 2147483648.0) as f32
    }
}
impl Elem for f64 {
    fn from_index(i: u64) -> Self {
        i as f64
    }
    fn from_lcg(x: u64) -> Self {
        x as f64 / 2147483648.0
    }
}

fn parse_value<T: Elem>(ty: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("`{v}` is not a valid {ty} value"))
}

fn initial<T: Elem>(ty: &str, len: usize, init: Init<'_>) -> Result<Vec<T>, String> {
    Ok(match init {
        Init::Zero => vec![T::zeroed(); len],
        Init::Iota => (0..len as u64).map(T::from_index).collect(),
        Init::Fill(v) => vec![parse_value::<T>(ty, v)?; len],
        Init::Mod(k) => (0..len as u64).map(|i| T::from_index(i % k)).collect(),
        Init::Lcg(seed) => {
            let mut x = seed;
            (0..len)
                .map(|_| {
                    // mod 2^31 of the wrapped u64 product equals mod 2^31 of the exact one.
                    x = x.wrapping_mul(1103515245).wrapping_add(12345) & 0x7fff_ffff;
                    T::from_lcg(x)
                })
                .collect()
        }
    })
}

/// A device buffer of one of the six element types.
enum Buffer {
    I32(DeviceMemory<i32>),
    U32(DeviceMemory<u32>),
    I64(DeviceMemory<i64>),
    U64(DeviceMemory<u64>),
    F32(DeviceMemory<f32>),
    F64(DeviceMemory<f64>),
}

fn upload<T: Elem>(
    exec: &StreamExecutor,
    ty: &str,
    len: usize,
    init: Init<'_>,
    list: &mut ArgList,
) -> Result<DeviceMemory<T>, String> {
    let mem = exec
        .copy_to_device(&initial::<T>(ty, len, init)?)
        .map_err(|e| e.to_string())?;
    *list = std::mem::take(list).arg(mem.ptr());
    Ok(mem)
}

fn line<T: Elem>(exec: &StreamExecutor, mem: &DeviceMemory<T>) -> Result<String, String> {
    let v = exec.copy_to_vec(mem).map_err(|e| e.to_string())?;
    Ok(v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" "))
}

fn run(cmd: &Command<'_>) -> Result<String, String> {
    let e = |e: streamexec::Error| e.to_string();
    let exec = PlatformManager::platform_with_name(cmd.platform)
        .and_then(|p| p.executor_for_device(0))
        .map_err(e)?;
    if cmd.race_check {
        exec.set_race_check(true).map_err(e)?;
    }
    let arity = cmd.args.len() + usize::from(cmd.shared_bytes.is_some());
    let spec = match &cmd.source {
        Source::Ptx(path) => {
            MultiKernelLoaderSpec::new(arity).add_cuda_ptx_on_disk(path, cmd.kernel)
        }
        Source::Cl(path) => {
            MultiKernelLoaderSpec::new(arity).add_opencl_text_on_disk(path, cmd.kernel)
        }
    };
    let kernel = exec.get_untyped_kernel(&spec).map_err(e)?;
    let mut list = ArgList::new();
    // Every buffer lives until the launch is done; `out:` ones are printed.
    let mut buffers = Vec::new();
    for (k, arg) in cmd.args.iter().enumerate() {
        match *arg {
            Arg::Scalar(ty, v) => {
                let at = |r: Result<ArgList, String>| r.map_err(|m| format!("argument {k}: {m}"));
                let l = std::mem::take(&mut list);
                list = at(match ty {
                    "i32" => parse_value::<i32>(ty, v).map(|x| l.arg(x)),
                    "u32" => parse_value::<u32>(ty, v).map(|x| l.arg(x)),
                    "i64" => parse_value::<i64>(ty, v).map(|x| l.arg(x)),
                    "u64" => parse_value::<u64>(ty, v).map(|x| l.arg(x)),
                    "f32" => parse_value::<f32>(ty, v).map(|x| l.arg(x)),
                    _ => parse_value::<f64>(ty, v).map(|x| l.arg(x)),
                })?;
            }
            Arg::Buffer { out, ty, len, init } => {
                let l = &mut list;
                let buf = match ty {
                    "i32" => upload(&exec, ty, len, init, l).map(Buffer::I32),
                    "u32" => upload(&exec, ty, len, init, l).map(Buffer::U32),
                    "i64" => upload(&exec, ty, len, init, l).map(Buffer::I64),
                    "u64" => upload(&exec, ty, len, init, l).map(Buffer::U64),
                    "f32" => upload(&exec, ty, len, init, l).map(Buffer::F32),
                    _ => upload(&exec, ty, len, init, l).map(Buffer::F64),
                }
                .map_err(|m| format!("argument {k}: {m}"))?;
                buffers.push((k, out, buf));
            }
        }
    }
    if let Some(n) = cmd.shared_bytes {
        list = list.arg(SharedMemory::<u8>::new(n as usize));
    }
    let mut stream = exec.create_stream().map_err(e)?;
    stream
        .then_launch_untyped(cmd.block, cmd.grid, &kernel, &list)
        .block_host_until_done()
        .map_err(e)?;
    let mut text = String::new();
    for (k, _, buf) in buffers.iter().filter(|b| b.1) {
        let values = match buf {
            Buffer::I32(m) => line(&exec, m),
            Buffer::U32(m) => line(&exec, m),
            Buffer::I64(m) => line(&exec, m),
            Buffer::U64(m) => line(&exec, m),
            Buffer::F32(m) => line(&exec, m),
            Buffer::F64(m) => line(&exec, m),
        }?;
        text.push_str(&format!("arg{k}: {values}\n"));
    }
    Ok(text)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match parse_command(&args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("run_kernel: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&cmd) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("run_kernel: {msg}");
            ExitCode::FAILURE
        }
    }
}
