//! Unified memory: one allocation that kernels and the host use at once, without copies.

use std::time::Duration;

use streamexec::{Error, HostMemory, StreamExecutor, UnifiedMemory};

use crate::common::{POISON_U32, random_u32s, rng};
use crate::{kernels, on_each_platform};

fn unified(exec: &StreamExecutor, n: usize) -> Option<UnifiedMemory<u32>> {
    match exec.allocate_unified::<u32>(n) {
        Ok(u) => Some(u),
        Err(e @ Error::Unsupported { .. }) => {
            assert!(
                !exec.description().unified_memory,
                "{} reports unified memory but: {e}",
                exec.platform_name()
            );
            eprintln!("skipping on {}: {e}", exec.platform_name());
            None
        }
        Err(e) => panic!("allocate_unified: {e}"),
    }
}

#[test]
fn kernels_and_the_host_share_unified_memory_without_copies() {
    on_each_platform(|exec| {
        let k: kernels::Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let mut r = rng("unified_memory");
        let n = 5000;
        let Some(u) = unified(exec, n) else { return };
        assert!(
            (0..n).all(|i| u.load(i) == 0),
            "unified memory starts zeroed"
        );
        let data = random_u32s(&mut r, n, u32::MAX);
        data.iter().enumerate().for_each(|(i, v)| u.store(i, *v));
        let mut s = exec.create_stream().unwrap();
        s.then_launch(256, (n as u32).div_ceil(256), &k, (u.ptr(), n as u32, 7, 3));
        s.block_host_until_done().unwrap();
        let mut want = data.clone();
        kernels::affine_ref(&mut want, 7, 3);
        assert!(
            (0..n).all(|i| u.load(i) == want[i]),
            "kernel results visible to the host"
        );

        // Stream copies and fills work on it like on any device memory.
        let mut back = HostMemory::from_slice(&vec![POISON_U32; n]).unwrap();
        s.then_memset32(u.as_device().slice(0..10).unwrap(), 5)
            .then_memcpy_d2h(u.as_device(), &mut back);
        s.block_host_until_done().unwrap();
        want[..10].fill(5);
        assert_eq!(back.as_slice(), &want[..]);
        let plain = exec.copy_to_device(&vec![9u32; n]).unwrap();
        s.then_memcpy_d2d(&plain, u.as_device())
            .block_host_until_done()
            .unwrap();
        assert!((0..n).all(|i| u.load(i) == 9));
    });
}

#[test]
fn dropping_unified_memory_under_a_queued_kernel_is_safe() {
    on_each_platform(|exec| {
        let k: kernels::Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(30)));
        {
            let Some(u) = unified(exec, 1 << 16) else {
                return;
            };
            s.then_launch(256, 256, &k, (u.ptr(), 1 << 16, 3, 1));
        } // dropped while the launch waits behind the sleep
        s.block_host_until_done().unwrap();
        exec.synchronize_all().unwrap();
        let again = unified(exec, 16).unwrap();
        assert_eq!(again.load(15), 0);
    });
}

#[test]
fn a_running_kernel_sees_a_host_store_to_unified_memory() {
    on_each_platform(|exec| {
        let k: kernels::Spin = exec.get_kernel(&kernels::spin()).unwrap();
        let Some(flag) = unified(exec, 1) else { return };
        let out = exec.copy_to_device(&[POISON_U32]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_launch(1, 1, &k, (flag.ptr(), out.ptr()));
        std::thread::sleep(Duration::from_millis(50)); // the kernel is spinning by now
        flag.store(0, 42);
        s.block_host_until_done().unwrap();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![42]);
    });
}
