//! The file opcodes. Device `FILE*` values are handles into a table (low two bits 0), or 1, 2,
//! 3 for stdin, stdout, stderr: a device that passes garbage gets an error result, never a
//! host crash (as a raw host `FILE*` would give).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{ServiceState, handler, lanes_of, reply_words, write_to};
use crate::error::Result;
use crate::layout::Packet;
use crate::opcode as op;
use crate::port::{Handler, MAX_STREAM_BYTES, Port};

/// The standard streams as a device encodes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdStream {
    /// 1.
    Stdin = 1,
    /// 2.
    Stdout = 2,
    /// 3.
    Stderr = 3,
}

struct HostFile {
    file: File,
    pushback: Vec<u8>,
    eof: bool,
    error: bool,
}

pub(crate) struct Files {
    table: Mutex<HashMap<u64, HostFile>>,
    next: AtomicU64,
}

impl Default for Files {
    fn default() -> Self {
        Files {
            table: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0x1000),
        }
    }
}

const EOF: u64 = -1i64 as u64;

impl Files {
    /// Writes to a device stream; the count written.
    pub(crate) fn write(&self, s: &ServiceState, stream: u64, bytes: &[u8]) -> u64 {
        match stream & 3 {
            2 => write_to(&s.stdout, false, bytes),
            3 => write_to(&s.stderr, true, bytes),
            1 => 0,
            _ => self.with(stream, 0, |f| match f.file.write_all(bytes) {
                Ok(()) => bytes.len() as u64,
                Err(_) => {
                    f.error = true;
                    0
                }
            }),
        }
    }

    fn with(&self, handle: u64, missing: u64, f: impl FnOnce(&mut HostFile) -> u64) -> u64 {
        self.table.lock().get_mut(&handle).map_or(missing, f)
    }

    fn open(&self, path: &[u8], mode: &[u8]) -> u64 {
        let path = String::from_utf8_lossy(
            &path[..path.iter().position(|&c| c == 0).unwrap_or(path.len())],
        )
        .into_owned();
        let mode: String = mode
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as char)
            .filter(|&c| c != 'b')
            .collect();
        let mut o = OpenOptions::new();
        match mode.as_str() {
            "r" => o.read(true),
            "r+" => o.read(true).write(true),
            "w" => o.write(true).create(true).truncate(true),
            "w+" => o.read(true).write(true).create(true).truncate(true),
            "a" => o.append(true).create(true),
            "a+" => o.read(true).append(true).create(true),
            _ => return 0,
        };
        match o.open(path) {
            Ok(file) => {
                let h = self.next.fetch_add(4, Ordering::Relaxed);
                self.table.lock().insert(
                    h,
                    HostFile {
                        file,
                        pushback: Vec::new(),
                        eof: false,
                        error: false,
                    },
                );
                h
            }
            Err(_) => 0,
        }
    }

    fn read(&self, stream: u64, max: usize, line: bool) -> Vec<u8> {
        let read_one = |f: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>| {
            let mut out = Vec::new();
            let mut b = [0u8];
            while out.len() < max {
                match f(&mut b) {
                    Ok(1) => {
                        out.push(b[0]);
                        if line && b[0] == b'\n' {
                            break;
                        }
                    }
                    _ => break,
                }
            }
            out
        };
        match stream & 3 {
            1 => read_one(&mut |b| std::io::stdin().read(b)),
            0 => {
                let mut t = self.table.lock();
                let Some(f) = t.get_mut(&stream) else {
                    return Vec::new();
                };
                let mut out = Vec::new();
                while out.len() < max && !(line && out.last() == Some(&b'\n')) {
                    if let Some(c) = f.pushback.pop() {
                        out.push(c);
                        continue;
                    }
                    let rest = if line {
                        read_one(&mut |b| f.file.read(b))
                    } else {
                        let mut v = vec![0u8; max - out.len()];
                        match f.file.read(&mut v) {
                            Ok(n) => v.truncate(n),
                            Err(_) => {
                                f.error = true;
                                v.clear()
                            }
                        }
                        v
                    };
                    if rest.is_empty() {
                        f.eof = true;
                        break;
                    }
                    out.extend(rest);
                    if !line {
                        // fread keeps reading until max or EOF.
                        continue;
                    }
                    break;
                }
                out
            }
            _ => Vec::new(),
        }
    }
}

fn words(port: &mut Port<'_>) -> Result<Vec<Packet>> {
    let mut v = vec![[0u64; 8]; port.lane_size()];
    port.recv(|l, p| v[l] = *p)?;
    Ok(v)
}

fn cstr(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]).into_owned()
}

/// The file opcodes' handlers, serving from `state`, appended to `out`.
pub(crate) fn handlers(state: &Arc<ServiceState>, out: &mut Vec<(u32, Handler)>) {
    let s = state.clone();
    out.push((
        op::OPEN_FILE,
        handler(move |port| {
            let paths = port.recv_n()?;
            let files = &s.files;
            port.recv_and_send(|l, p| {
                let mode = bytemuck::cast_slice::<u64, u8>(&p[..]).to_vec();
                p[0] = files.open(&paths[l], &mode);
            })
        }),
    ));
    // Packet-in, one-word-out operations on a stream in data[0] (UNGETC: data[1]).
    for code in [
        op::CLOSE_FILE,
        op::FEOF,
        op::FERROR,
        op::CLEARERR,
        op::FSEEK,
        op::FTELL,
        op::FFLUSH,
        op::UNGETC,
    ] {
        let s = state.clone();
        out.push((
            code,
            handler(move |port| {
                let files = &s.files;
                let req = words(port)?;
                let mut out = vec![0u64; req.len()];
                for l in lanes_of(port) {
                    let p = req[l];
                    let stream = if code == op::UNGETC { p[1] } else { p[0] };
                    out[l] = match code {
                        op::CLOSE_FILE => files.table.lock().remove(&stream).map_or(EOF, |_| 0),
                        op::FEOF => files.with(stream, 0, |f| f.eof as u64),
                        op::FERROR => files.with(stream, 0, |f| f.error as u64),
                        op::CLEARERR => files.with(stream, 0, |f| {
                            f.eof = false;
                            f.error = false;
                            0
                        }),
                        op::FSEEK => files.with(stream, EOF, |f| {
                            let pos = match p[2] {
                                0 => SeekFrom::Start(p[1]),
                                1 => SeekFrom::Current(p[1] as i64),
                                _ => SeekFrom::End(p[1] as i64),
                            };
                            f.pushback.clear();
                            f.eof = false;
                            f.file.seek(pos).map_or(EOF, |_| 0)
                        }),
                        op::FTELL => files.with(stream, EOF, |f| {
                            f.file
                                .stream_position()
                                .map_or(EOF, |x| x - f.pushback.len() as u64)
                        }),
                        op::FFLUSH => match stream & 3 {
                            0 => files.with(stream, EOF, |f| f.file.flush().map_or(EOF, |_| 0)),
                            _ => 0,
                        },
                        _ => files.with(stream, EOF, |f| {
                            f.pushback.push(p[0] as u8);
                            f.eof = false;
                            p[0] & 0xFF
                        }),
                    };
                }
                reply_words(port, &out)
            }),
        ));
    }
    for code in [op::READ_FROM_STREAM, op::READ_FGETS] {
        let s = state.clone();
        out.push((
            code,
            handler(move |port| {
                let req = words(port)?;
                let mut data = vec![Vec::new(); req.len()];
                for l in lanes_of(port) {
                    let max = req[l][0].min(MAX_STREAM_BYTES) as usize;
                    if code == op::READ_FGETS {
                        let mut line = s.files.read(req[l][1], max.saturating_sub(1), true);
                        if !line.is_empty() {
                            line.push(0);
                        }
                        data[l] = line;
                    } else {
                        data[l] = s.files.read(req[l][1], max, false);
                    }
                }
                port.send_n(|l| &data[l])?;
                if code == op::READ_FROM_STREAM {
                    let counts: Vec<u64> = data.iter().map(|d| d.len() as u64).collect();
                    reply_words(port, &counts)?;
                }
                Ok(())
            }),
        ));
    }
    out.push((
        op::REMOVE,
        handler(|port| {
            let paths = port.recv_n()?;
            let out: Vec<u64> = paths
                .iter()
                .map(|p| std::fs::remove_file(cstr(p)).map_or(EOF, |_| 0))
                .collect();
            reply_words(port, &out)
        }),
    ));
    out.push((
        op::RENAME,
        handler(|port| {
            let old = port.recv_n()?;
            let new = port.recv_n()?;
            let mut out = vec![0u64; old.len()];
            for l in lanes_of(port) {
                out[l] = std::fs::rename(cstr(&old[l]), cstr(&new[l])).map_or(EOF, |_| 0);
            }
            reply_words(port, &out)
        }),
    ));
    out.push((
        op::SYSTEM,
        handler(|port| {
            let _ = port.recv_n()?;
            // A kernel does not get a shell: system() returns -1.
            reply_words(port, &vec![EOF; port.lane_size()])
        }),
    ));
}
