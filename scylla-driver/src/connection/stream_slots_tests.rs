//! Every request ends exactly once: the slot state machine under every
//! interleaving of response, timeout, drop and close.

use super::*;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    Pin::new(f).poll(&mut cx)
}

fn slots(cap: usize) -> Arc<StreamSlots<u32>> {
    Arc::new(StreamSlots::new(cap))
}

#[test]
fn response_completes_and_frees() {
    let s = slots(4);
    let id = s.try_alloc(None).unwrap();
    let mut f = ResponseFuture::new(&s, id);
    assert!(poll_once(&mut f).is_pending());
    s.complete(id as i16, 7).unwrap();
    assert_eq!(poll_once(&mut f), Poll::Ready(SlotOutcome::Done(7)));
    drop(f);
    assert_eq!(s.in_use(), 0);
    // A second response for the same stream is a protocol violation.
    assert_eq!(
        s.complete(id as i16, 8),
        Err(CompleteError::UnknownStream(id as i16))
    );
}

#[test]
fn unknown_streams_are_rejected() {
    let s = slots(4);
    assert!(s.complete(3, 1).is_err());
    assert!(s.complete(-1, 1).is_err());
    assert!(s.complete(i16::MAX, 1).is_err());
}

#[test]
fn ids_are_bounded_and_recycled() {
    let s = slots(3);
    let ids: Vec<u16> = (0..3).map(|_| s.try_alloc(None).unwrap()).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    assert!(s.try_alloc(None).is_none());
    s.cancel_unsent(1);
    assert_eq!(s.try_alloc(None), Some(1));
}

#[test]
fn timeout_keeps_the_id_until_the_late_response() {
    let s = slots(1);
    let now = Instant::now();
    let id = s.try_alloc(Some(now)).unwrap();
    let mut f = ResponseFuture::new(&s, id);
    assert!(poll_once(&mut f).is_pending());
    assert_eq!(s.expire(now), 1);
    assert_eq!(poll_once(&mut f), Poll::Ready(SlotOutcome::TimedOut));
    drop(f);
    // Still reserved: the server may yet answer on this stream.
    assert_eq!(s.in_use(), 1);
    assert_eq!(s.orphans(), 1);
    assert!(s.try_alloc(None).is_none());
    s.complete(id as i16, 5).unwrap();
    assert_eq!(s.in_use(), 0);
    assert_eq!(s.orphans(), 0);
    assert!(s.try_alloc(None).is_some());
}

#[test]
fn late_response_before_the_requester_looks() {
    let s = slots(1);
    let now = Instant::now();
    let id = s.try_alloc(Some(now)).unwrap();
    let mut f = ResponseFuture::new(&s, id);
    s.expire(now + Duration::from_millis(1));
    s.complete(id as i16, 5).unwrap();
    assert_eq!(poll_once(&mut f), Poll::Ready(SlotOutcome::TimedOut));
    drop(f);
    assert_eq!(s.in_use(), 0);
    assert_eq!(s.orphans(), 0);
}

#[test]
fn deadlines_in_the_future_do_not_expire() {
    let s = slots(2);
    let now = Instant::now();
    let _id = s.try_alloc(Some(now + Duration::from_secs(5))).unwrap();
    let _no_deadline = s.try_alloc(None).unwrap();
    assert_eq!(s.expire(now), 0);
}

#[test]
fn dropped_future_orphans_then_response_frees() {
    let s = slots(2);
    let id = s.try_alloc(None).unwrap();
    let f = ResponseFuture::new(&s, id);
    drop(f);
    assert_eq!(s.orphans(), 1);
    s.complete(id as i16, 1).unwrap();
    assert_eq!((s.in_use(), s.orphans()), (0, 0));
}

#[test]
fn dropping_a_ready_future_frees() {
    let s = slots(2);
    let id = s.try_alloc(None).unwrap();
    let f = ResponseFuture::new(&s, id);
    s.complete(id as i16, 1).unwrap();
    drop(f);
    assert_eq!((s.in_use(), s.orphans()), (0, 0));
}

#[test]
fn close_ends_every_request_exactly_once() {
    let s = slots(8);
    let now = Instant::now();
    let waiting = s.try_alloc(None).unwrap();
    let timed_out = s.try_alloc(Some(now)).unwrap();
    let orphan = s.try_alloc(None).unwrap();
    let mut fw = ResponseFuture::new(&s, waiting);
    let mut ft = ResponseFuture::new(&s, timed_out);
    drop(ResponseFuture::new(&s, orphan));
    s.expire(now);
    s.close(|id| 1000 + id as u32);
    assert_eq!(
        poll_once(&mut fw),
        Poll::Ready(SlotOutcome::Done(1000 + waiting as u32))
    );
    assert_eq!(poll_once(&mut ft), Poll::Ready(SlotOutcome::TimedOut));
    drop((fw, ft));
    assert_eq!((s.in_use(), s.orphans()), (0, 0));
    assert!(s.try_alloc(None).is_none(), "closed slots hand out nothing");
}

#[tokio::test]
async fn waiters_get_an_id_when_one_frees() {
    let s = slots(1);
    let id = s.try_alloc(None).unwrap();
    let s2 = s.clone();
    let waiter = tokio::spawn(async move { s2.alloc(None).await });
    tokio::task::yield_now().await;
    let f = ResponseFuture::new(&s, id);
    s.complete(id as i16, 1).unwrap();
    assert_eq!(f.await, SlotOutcome::Done(1));
    assert_eq!(waiter.await.unwrap(), Some(id));
}

#[tokio::test]
async fn close_wakes_waiters_for_ids() {
    let s = slots(1);
    let _id = s.try_alloc(None).unwrap();
    let s2 = s.clone();
    let waiter = tokio::spawn(async move { s2.alloc(None).await });
    tokio::task::yield_now().await;
    s.close(|_| 0);
    assert_eq!(waiter.await.unwrap(), None);
}

#[test]
fn slots_grow_lazily() {
    let s: StreamSlots<u8> = StreamSlots::new(MAX_STREAMS);
    assert_eq!(s.chunks.iter().filter(|c| c.get().is_some()).count(), 0);
    let _ = s.try_alloc(None);
    assert_eq!(s.chunks.iter().filter(|c| c.get().is_some()).count(), 1);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc,
        Respond(usize),
        Expire,
        Drop(usize),
        Poll(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Alloc),
            3 => any::<usize>().prop_map(Op::Respond),
            1 => Just(Op::Expire),
            1 => any::<usize>().prop_map(Op::Drop),
            2 => any::<usize>().prop_map(Op::Poll),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Random interleavings: each request resolves exactly once, and after
        /// answering every outstanding stream and resolving every future, no id
        /// stays in use.
        #[test]
        fn every_request_ends_exactly_once(ops in proptest::collection::vec(op(), 1..80)) {
            let s = slots(8);
            let now = Instant::now();
            // (id, future, resolved, server_answered)
            let mut reqs: Vec<(u16, Option<ResponseFuture<u32>>, bool, bool)> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc => {
                        if let Some(id) = s.try_alloc(Some(now + Duration::from_secs(10))) {
                            reqs.push((id, Some(ResponseFuture::new(&s, id)), false, false));
                        }
                    }
                    Op::Respond(i) if !reqs.is_empty() => {
                        let n = reqs.len();
                        let r = &mut reqs[i % n];
                        if !r.3 {
                            prop_assert!(s.complete(r.0 as i16, r.0 as u32).is_ok());
                            r.3 = true;
                        }
                    }
                    Op::Expire => { s.expire(now + Duration::from_secs(11)); }
                    Op::Drop(i) if !reqs.is_empty() => {
                        let n = reqs.len();
                        let r = &mut reqs[i % n];
                        r.1 = None;
                        r.2 = true;
                    }
                    Op::Poll(i) if !reqs.is_empty() => {
                        let n = reqs.len();
                        let r = &mut reqs[i % n];
                        if let Some(f) = r.1.as_mut() {
                            if let Poll::Ready(out) = poll_once(f) {
                                prop_assert!(!r.2, "resolved twice");
                                if let SlotOutcome::Done(v) = out { prop_assert_eq!(v, r.0 as u32); }
                                r.2 = true;
                                r.1 = None;
                            }
                        }
                    }
                    _ => {}
                }
                // Drop requests that are fully finished so their ids can recycle.
                reqs.retain(|r| !(r.2 && r.3));
            }
            // Answer everything still outstanding, then resolve every future.
            for r in reqs.iter_mut() {
                if !r.3 { prop_assert!(s.complete(r.0 as i16, r.0 as u32).is_ok()); }
                if let Some(f) = r.1.as_mut() { prop_assert!(poll_once(f).is_ready()); }
                r.1 = None;
            }
            prop_assert_eq!(s.in_use(), 0);
            prop_assert_eq!(s.orphans(), 0);
        }
    }
}

#[test]
fn idle_to_busy_is_reported_even_when_two_allocate_before_looking() {
    let s = slots(8);
    assert!(!s.take_became_busy());
    // Two requesters allocate before either looks (in_use is 2 for both).
    let a = s.try_alloc(None).unwrap();
    let b = s.try_alloc(None).unwrap();
    assert!(s.take_became_busy());
    assert!(!s.take_became_busy());
    s.cancel_unsent(a);
    s.cancel_unsent(b);
    // Busy again after idle: reported again.
    let c = s.try_alloc(None).unwrap();
    let _d = s.try_alloc(None).unwrap();
    assert!(s.take_became_busy());
    s.cancel_unsent(c);
    assert!(!s.take_became_busy(), "still busy: no new transition");
}

/// A waker that counts its wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_wake_batch_wakes_its_requesters_once_when_told_or_dropped() {
    let s = slots(8);
    let counter = Arc::new(CountingWaker(std::sync::atomic::AtomicUsize::new(0)));
    let waker = std::task::Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    let ids: Vec<u16> = (0..3).map(|_| s.try_alloc(None).unwrap()).collect();
    let mut futures: Vec<_> = ids.iter().map(|&id| ResponseFuture::new(&s, id)).collect();
    for f in &mut futures {
        assert!(Pin::new(f).poll(&mut cx).is_pending());
    }
    let woken = || counter.0.load(Ordering::SeqCst);

    // Completed into a batch: the values are there, nobody is woken yet.
    let mut wakes = WakeBatch::new();
    s.complete_into(ids[0] as i16, 10, &mut wakes).unwrap();
    s.complete_into(ids[1] as i16, 11, &mut wakes).unwrap();
    assert_eq!((wakes.len(), woken()), (2, 0));
    // An unknown stream is an error and adds no one.
    assert!(s.complete_into(-1, 0, &mut wakes).is_err());
    assert_eq!(wakes.len(), 2);
    wakes.wake_all();
    assert_eq!((wakes.len(), woken()), (0, 2));
    assert_eq!(
        Pin::new(&mut futures[0]).poll(&mut cx),
        Poll::Ready(SlotOutcome::Done(10))
    );

    // Dropping a batch wakes whoever is left in it (the reader's way out on
    // an error or a cancellation).
    let mut wakes = WakeBatch::new();
    s.complete_into(ids[2] as i16, 12, &mut wakes).unwrap();
    assert_eq!(woken(), 2);
    drop(wakes);
    assert_eq!(woken(), 3);
    assert_eq!(
        Pin::new(&mut futures[2]).poll(&mut cx),
        Poll::Ready(SlotOutcome::Done(12))
    );
}
