//! Alone in its process: no other test's calls reach the server it watches.

use streamexec::*;

/// The server thread of an idle executor is parked: it is asleep in most samples over a
/// second, and uses about one clock tick of CPU time at most (it wakes up to 100 times a second to look for
/// clients that cannot wake it). A spinning thread would use about 100.
#[test]
fn an_idle_server_uses_no_cpu() {
    let exec = PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    let client = exec.rpc().unwrap().client();
    let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
        "calls_once",
        move |ctx, (_x,): (u32,)| {
            if ctx.global_id_x() == 0 {
                client.noop().unwrap();
            }
        },
    ));
    let kernel: TypedKernel<(u32,)> = exec.get_kernel(&spec).unwrap();
    let mut stream = exec.create_stream().unwrap();
    stream.then_launch(ThreadDim::default(), BlockDim::default(), &kernel, (0,));
    stream.block_host_until_done().unwrap();
    let find = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| {
                let d = e.unwrap().path();
                let comm = std::fs::read_to_string(d.join("comm")).ok()?;
                (comm.trim() == "streamexec-rpc").then(|| {
                    let stat = std::fs::read_to_string(d.join("stat")).unwrap();
                    let f: Vec<String> = stat
                        .rsplit_once(')')
                        .unwrap()
                        .1
                        .split_whitespace()
                        .map(String::from)
                        .collect();
                    // state, utime + stime (clock ticks)
                    (
                        f[0].clone(),
                        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap(),
                    )
                })
            })
            .collect::<Vec<_>>()
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = find();
    assert!(!before.is_empty(), "no streamexec-rpc thread");
    // A parked thread that wakes to look around can be caught running now and then; one that
    // spins is always running. Sample its state across the second.
    let mut asleep = vec![0; before.len()];
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        for (n, (state, _)) in asleep.iter_mut().zip(find()) {
            *n += (state == "S") as u32;
        }
    }
    let after = find();
    // Tick counts are truncated, so about one tick of use can read as two.
    assert!(
        before
            .iter()
            .zip(&after)
            .zip(&asleep)
            .all(|((b, a), n)| *n >= 10 && a.1 <= b.1 + 2),
        "{before:?} -> {after:?}, asleep in {asleep:?} of 20 samples"
    );
}
