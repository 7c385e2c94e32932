//! Copies and fills, checked element by element against a host model.

use rand::RngExt;
use std::time::Duration;
use streamexec::{Error, HostMemory, PlatformManager, StreamExecutor};

use crate::common::{POISON_U32, random_u32s, rng};
use crate::on_each_platform;

fn poisoned(exec: &StreamExecutor, n: usize) -> streamexec::DeviceMemory<u32> {
    exec.copy_to_device(&vec![POISON_U32; n]).unwrap()
}

#[test]
fn h2d_then_d2h_round_trips_random_data() {
    on_each_platform(|exec| {
        let mut r = rng("h2d_then_d2h_round_trips_random_data");
        for _ in 0..8 {
            let n = r.random_range(1..100_000);
            let data = random_u32s(&mut r, n, u32::MAX);
            let src = HostMemory::from_slice(&data).unwrap();
            let dev = poisoned(exec, n);
            let mut back = HostMemory::from_slice(&vec![POISON_U32; n]).unwrap();
            let mut s = exec.create_stream().unwrap();
            s.then_memcpy_h2d(&src, &dev)
                .then_memcpy_d2h(&dev, &mut back);
            s.block_host_until_done().unwrap();
            assert_eq!(back.as_slice(), &data[..]);
        }
    });
}

#[test]
fn pinned_host_memory_round_trips() {
    on_each_platform(|exec| {
        let mut r = rng("pinned_host_memory_round_trips");
        let n = 4099;
        let data = random_u32s(&mut r, n, u32::MAX);
        let mut src = exec.allocate_host::<u32>(n).unwrap();
        assert!(
            src.as_slice().iter().all(|&v| v == 0),
            "pinned memory starts zeroed"
        );
        src.as_mut_slice().copy_from_slice(&data);
        let mut back = exec.allocate_host::<u32>(n).unwrap();
        back.as_mut_slice().fill(POISON_U32);
        let dev = exec.allocate_array::<u32>(n).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_memcpy_h2d(&src, &dev)
            .then_memcpy_d2h(&dev, &mut back);
        s.block_host_until_done().unwrap();
        assert_eq!(back.as_slice(), &data[..]);
    });
}

#[test]
fn d2d_copies_between_sub_slices() {
    on_each_platform(|exec| {
        let mut r = rng("d2d_copies_between_sub_slices");
        for _ in 0..16 {
            let n = r.random_range(1..5000);
            let data = random_u32s(&mut r, n, u32::MAX);
            let src = exec.copy_to_device(&data).unwrap();
            let dst = poisoned(exec, n);
            let a = r.random_range(0..n);
            let b = r.random_range(a..=n);
            let c = r.random_range(0..=n - (b - a));
            let mut s = exec.create_stream().unwrap();
            s.then_memcpy_d2d(src.slice(a..b).unwrap(), dst.slice(c..c + (b - a)).unwrap());
            s.block_host_until_done().unwrap();
            let mut want = vec![POISON_U32; n];
            want[c..c + (b - a)].copy_from_slice(&data[a..b]);
            assert_eq!(
                exec.copy_to_vec(&dst).unwrap(),
                want,
                "copy {a}..{b} to {c}"
            );
        }
    });
}

#[test]
fn memset_memset32_and_zero_touch_only_their_range() {
    on_each_platform(|exec| {
        let mut r = rng("memset_memset32_and_zero_touch_only_their_range");
        for _ in 0..16 {
            let n = r.random_range(1..3000);
            let dev = poisoned(exec, n);
            let mut model = vec![POISON_U32; n];
            let mut s = exec.create_stream().unwrap();
            for op in 0..3 {
                let a = r.random_range(0..n);
                let b = r.random_range(a..=n);
                let slice = dev.slice(a..b).unwrap();
                match op {
                    0 => {
                        let v: u8 = r.random();
                        s.then_memset(slice, v);
                        model[a..b].fill(u32::from_ne_bytes([v; 4]));
                    }
                    1 => {
                        let v: u32 = r.random();
                        s.then_memset32(slice, v);
                        model[a..b].fill(v);
                    }
                    _ => {
                        s.then_mem_zero(slice);
                        model[a..b].fill(0);
                    }
                }
            }
            s.block_host_until_done().unwrap();
            assert_eq!(exec.copy_to_vec(&dev).unwrap(), model);
        }
    });
}

#[test]
fn byte_granular_memset_on_odd_offsets() {
    on_each_platform(|exec| {
        let n = 67;
        let dev = exec.copy_to_device(&[0xAAu8; 67]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_memset(dev.slice(3..62).unwrap(), 0x5C);
        s.block_host_until_done().unwrap();
        let got = exec.copy_to_vec(&dev).unwrap();
        for (i, v) in got.iter().enumerate().take(n) {
            assert_eq!(
                *v,
                if (3..62).contains(&i) { 0x5C } else { 0xAA },
                "byte {i}"
            );
        }
    });
}

#[test]
fn synchronous_copies_and_zeroed_allocations() {
    on_each_platform(|exec| {
        let mut r = rng("synchronous_copies_and_zeroed_allocations");
        let data = random_u32s(&mut r, 1000, u32::MAX);
        let dev = exec.copy_to_device(&data).unwrap();
        assert_eq!(exec.copy_to_vec(&dev).unwrap(), data);
        let mut part = vec![POISON_U32; 10];
        exec.synchronous_memcpy_d2h(dev.slice(5..15).unwrap(), &mut part)
            .unwrap();
        assert_eq!(part, data[5..15]);
        exec.synchronous_memcpy_h2d(&[7, 8, 9], dev.slice(997..).unwrap())
            .unwrap();
        assert_eq!(
            exec.copy_to_vec(dev.slice(995..).unwrap()).unwrap(),
            [data[995], data[996], 7, 8, 9]
        );
        assert_eq!(
            exec.synchronous_copy_scalar_to_host(dev.slice(998..).unwrap())
                .unwrap(),
            8
        );
        drop(dev);
        let z = exec.allocate_zeroed_array::<u32>(1000).unwrap();
        assert!(exec.copy_to_vec(&z).unwrap().iter().all(|&v| v == 0));
        let s = exec.allocate_zeroed_scalar::<f64>().unwrap();
        assert_eq!(exec.synchronous_copy_scalar_to_host(&s).unwrap(), 0.0);
        let empty = exec.allocate_array::<u32>(0).unwrap();
        assert!(empty.is_empty());
        assert!(exec.copy_to_vec(&empty).unwrap().is_empty());
    });
}

#[test]
fn reading_host_memory_waits_for_queued_copy_into_it() {
    on_each_platform(|exec| {
        let data: Vec<u32> = (0..4096).collect();
        let dev = exec.copy_to_device(&data).unwrap();
        let mut back = HostMemory::<u32>::zeroed(4096).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(50)))
            .then_memcpy_d2h(&dev, &mut back);
        // No block_host_until_done: reading must wait for the copy.
        assert_eq!(back.as_slice(), &data[..]);
        s.block_host_until_done().unwrap();
    });
}

#[test]
fn memory_usage_reports_sane_numbers() {
    on_each_platform(|exec| {
        let u = exec.memory_usage().unwrap();
        assert!(u.total > 0 && u.free <= u.total, "{u:?}");
        assert_eq!(u.total, exec.description().total_memory);
    });
}

#[test]
fn peer_copies_move_data_between_devices_or_fail_cleanly() {
    on_each_platform(|exec| {
        let err = exec.enable_peer_access_to(exec).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(!exec.can_enable_peer_access_to(exec));
        let mut r = rng("peer_copy");
        let data: Vec<u32> = (0..4099).map(|_| r.random()).collect();
        let platform = PlatformManager::platform_with_name(exec.platform_name()).unwrap();
        let mut dst = exec.copy_to_device(&vec![POISON_U32; data.len()]).unwrap();
        let Ok(other) = platform.executor_for_device(1) else {
            // One device: a copy "from a peer" that is this device is refused, not run.
            let src = exec.copy_to_device(&data).unwrap();
            let mut s = exec.create_stream().unwrap();
            let status = s
                .then_memcpy_peer(exec, &src, &mut dst)
                .block_host_until_done();
            if let Err(e) = status {
                assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            } else {
                assert_eq!(exec.copy_to_vec(&dst).unwrap(), data);
            }
            return;
        };
        let src = other.copy_to_device(&data).unwrap();
        if exec.can_enable_peer_access_to(&other) {
            exec.enable_peer_access_to(&other).unwrap();
        }
        let mut s = exec.create_stream().unwrap();
        match s
            .then_memcpy_peer(&other, &src, &mut dst)
            .block_host_until_done()
        {
            Ok(()) => assert_eq!(exec.copy_to_vec(&dst).unwrap(), data),
            Err(e) => assert!(matches!(e, Error::Unsupported { .. }), "{e}"),
        }
        // The source's owner must be named correctly: memory of `exec` passed as `other`'s.
        let mut s = exec.create_stream().unwrap();
        let mine = exec.copy_to_device(&data).unwrap();
        let err = s
            .then_memcpy_peer(&other, &mine, &mut dst)
            .block_host_until_done()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    });
}
