//! plugrl::interrupt_all, in a test binary of its own: it interrupts every
//! client of the process, so it must not share one with other tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use plugrl::{Client, Error};
use plugrl_examples::testing::Server;

/// An open still waiting for its server (`no-metadata`: the handshake
/// completes, metadata never comes) has no Interrupt yet: interrupt_all
/// ends it, as plugrl.h says for a Ctrl-C while connecting.
#[test]
fn interrupt_all_ends_an_open_that_waits_for_metadata() {
    let server = Server::hostile("no-metadata", &[]);
    let done = Arc::new(AtomicBool::new(false));
    // Again every 300 ms until open returns: an interrupt_all that comes
    // before the open has begun ends nothing, and a slow machine may be
    // that late.
    let waker = thread::spawn({
        let done = done.clone();
        move || {
            while !done.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(300));
                plugrl::interrupt_all()?;
            }
            Ok::<(), Error>(())
        }
    });
    let started = Instant::now();
    let e = Client::builder(&server.url)
        .metadata_timeout(Duration::from_secs(60))
        .max_reconnects(0)
        .open()
        .unwrap_err();
    let took = started.elapsed();
    done.store(true, Ordering::Release);
    assert!(matches!(e, Error::Interrupted(_)), "{e}");
    assert!(took < Duration::from_secs(10), "interrupted after {took:?}");
    waker.join().unwrap().unwrap();
}
