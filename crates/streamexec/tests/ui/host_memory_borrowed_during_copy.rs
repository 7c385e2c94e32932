// A device-to-host copy needs `&mut HostMemory`, so the host bytes cannot stay borrowed while
// a copy into them is queued.
use streamexec::*;

fn copy(stream: &mut Stream, dev: &DeviceMemory<u32>, host: &mut HostMemory<u32>) {
    let view: &[u32] = host.as_slice();
    stream.then_memcpy_d2h(dev, host);
    println!("{}", view[0]);
}

fn main() {}
