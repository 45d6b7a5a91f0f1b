//! What one thread going to sleep and another waking it costs on this
//! machine, in CPU time: the price a client pays each time it runs out of
//! work and waits for the server.
//!
//! Two threads pass a byte back and forth over a Unix socket pair with
//! blocking reads, so every round trip is two sleeps and two wake-ups (and
//! four syscalls). The process's CPU time (all threads, from
//! `/proc/self/task/*/schedstat`) divided by the round trips is the cost of
//! those two sleep/wake cycles. Run it twice to compare the threads on two
//! CPUs (the default) with both on one (`taskset -c 0`):
//!
//! ```text
//! cargo run --release --example wake_cost
//! taskset -c 0 cargo run --release --example wake_cost
//! cargo run --release --example wake_cost -- --round-trips 50000
//! ```
//!
//! On the 2-core virtual machines this driver is measured on, a round trip
//! across the two CPUs costs several times one on a single CPU: waking a
//! sleeping CPU is what makes a client's sleeps expensive there (see the
//! README's performance section).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// CPU time of every live thread of this process, in nanoseconds.
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut round_trips: u32 = 100_000;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--round-trips" => {
                round_trips = args
                    .next()
                    .ok_or("--round-trips needs a number")?
                    .parse()
                    .map_err(|e| format!("--round-trips: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?} (--round-trips N)").into()),
        }
    }
    if round_trips == 0 {
        return Err("--round-trips must be at least 1".into());
    }
    let (mut here, mut there) = UnixStream::pair()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8; 1];
        for _ in 0..round_trips {
            there.read_exact(&mut byte)?;
            there.write_all(&byte)?;
        }
        Ok(())
    });
    let (cpu0, wall0) = (process_cpu_ns(), Instant::now());
    let mut byte = [0u8; 1];
    for _ in 0..round_trips {
        here.write_all(&byte)?;
        here.read_exact(&mut byte)?;
    }
    // Measured before the echo thread exits: its schedstat goes with it.
    let (cpu, wall) = (process_cpu_ns() - cpu0, wall0.elapsed());
    echo.join().map_err(|_| "the echo thread panicked")??;
    let n = f64::from(round_trips);
    println!(
        "{round_trips} round trips between two threads (two sleeps and two wake-ups each): \
         {:.2} us of CPU and {:.2} us of wall time per round trip",
        cpu as f64 / n / 1e3,
        wall.as_secs_f64() / n * 1e6,
    );
    Ok(())
}
