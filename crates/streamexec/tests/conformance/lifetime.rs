//! Lifetimes: executors shared per device, memory that outlives its executor handle, memory
//! dropped or forgotten while queued work still uses it.

use std::time::Duration;

use streamexec::{HostMemory, PlatformManager};

use crate::common::POISON_U32;
use crate::{kernels, on_each_platform};

#[test]
fn one_executor_per_device_while_it_lives() {
    on_each_platform(|exec| {
        let p = PlatformManager::platform_with_name(exec.platform_name()).unwrap();
        let again = p.executor_for_device(0).unwrap();
        assert!(again.same_as(exec));
        assert!(p.executor_for_device(p.device_count()).is_err());
    });
}

#[test]
fn memory_keeps_its_executor_alive_after_the_handle_drops() {
    on_each_platform(|exec| {
        let name = exec.platform_name();
        let data: Vec<u32> = (0..1000).collect();
        let mem = {
            let e = PlatformManager::platform_with_name(name)
                .unwrap()
                .executor_for_device(0)
                .unwrap();
            e.copy_to_device(&data).unwrap()
        };
        // Every user handle except the one inside `mem` (and the suite's) is gone.
        let e = mem.executor().clone();
        let mut s = e.create_stream().unwrap();
        let mut back = HostMemory::from_slice(&vec![POISON_U32; 1000]).unwrap();
        s.then_memcpy_d2h(&mem, &mut back)
            .block_host_until_done()
            .unwrap();
        assert_eq!(back.as_slice(), &data[..]);
    });
}

#[test]
fn dropping_memory_that_queued_work_uses_is_safe() {
    on_each_platform(|exec| {
        let k: kernels::Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let keep = exec.copy_to_device(&[1u32; 256]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(30)));
        {
            let doomed = exec.copy_to_device(&[7u32; 4096]).unwrap();
            s.then_launch(256, 16, &k, (doomed.ptr(), 4096, 3, 1))
                .then_memset(&doomed, 0);
        } // dropped while the launch is still queued behind the sleep
        s.then_launch(256, 1, &k, (keep.ptr(), 256, 2, 0));
        s.block_host_until_done().unwrap();
        assert_eq!(exec.copy_to_vec(&keep).unwrap(), vec![2u32; 256]);
    });
}

#[test]
fn forgetting_host_memory_with_a_queued_copy_is_safe() {
    on_each_platform(|exec| {
        let dev = exec.copy_to_device(&[5u32; 1 << 16]).unwrap();
        let mut s = exec.create_stream().unwrap();
        let mut host = HostMemory::<u32>::zeroed(1 << 16).unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(20)))
            .then_memcpy_d2h(&dev, &mut host);
        std::mem::forget(host); // leaks; the queued copy still has valid memory to write
        let src = HostMemory::from_slice(&[8u32; 1 << 16]).unwrap();
        s.then_memcpy_h2d(&src, &dev);
        drop(src); // dropped with a queued read: kept alive by the copy
        s.block_host_until_done().unwrap();
        assert!(exec.copy_to_vec(&dev).unwrap().iter().all(|&v| v == 8));
    });
}

#[test]
fn forgetting_streams_and_memory_does_not_break_the_executor() {
    on_each_platform(|exec| {
        let mem = exec.copy_to_device(&[1u8; 100]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_mem_zero(&mem);
        std::mem::forget(s);
        std::mem::forget(mem);
        exec.synchronize_all().unwrap();
        let fresh = exec.copy_to_device(&[3u8; 10]).unwrap();
        assert_eq!(exec.copy_to_vec(&fresh).unwrap(), vec![3u8; 10]);
    });
}
