//! The batcher and the routing key through the Rust API: a small queue's batches checked by hand
//! (FIFO, the deepest shared prefix first, the age bound, the budget in compact rows), refusals with
//! their status, every request answered once, the batch fed to the planner as it is, the cache's
//! preference on qwen3_tiny (`next_batch_with_cache`, `cached_prefix`), and keys against values
//! computed by an independent implementation (python3: FNV-1a 64 over little-endian bytes, then
//! fmix64).
mod common;

use std::collections::HashSet;

use common::Fixture;
use radix_mlp::{
    route_key, route_key_header, BatchMode, Batcher, BatcherParams, ContextParams, Model, PlanParams, Planner,
    RouteParams, Status,
};

fn batcher(mode: BatchMode, max_wait_us: u64) -> Batcher {
    Batcher::new(&BatcherParams { mode, max_wait_us, ..BatcherParams::default() }).unwrap()
}

/// Two queries' passages interleaved with an unrelated request.
fn push_interleaved(b: &mut Batcher) {
    b.push(10, &[1, 2, 3, 10], 0).unwrap();
    b.push(20, &[7, 8, 9], 1).unwrap();
    b.push(30, &[4, 5, 6, 20], 2).unwrap();
    b.push(11, &[1, 2, 3, 11], 3).unwrap();
    b.push(31, &[4, 5, 6, 21], 4).unwrap();
    b.push(12, &[1, 2, 3, 12], 5).unwrap();
}

#[test]
fn prefix_groups_deepest_shared_prefix_first() {
    let mut b = batcher(BatchMode::Prefix, u64::MAX);
    push_interleaved(&mut b);
    let batch = b.next_batch(12, 8, 100).unwrap();
    assert_eq!(batch.ids(), [10, 11, 12]);
    assert_eq!(batch.shared_tokens(), 6);
    assert_eq!(batch.tokens(1), [1, 2, 3, 11]);
    assert_eq!(batch.position_ids(), [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    let batch = b.next_batch(12, 8, 100).unwrap();
    assert_eq!(batch.ids(), [30, 31, 20]);
    assert!(b.next_batch(12, 8, 100).unwrap().is_empty());
}

#[test]
fn fifo_is_a_plain_queue() {
    let mut b = batcher(BatchMode::Fifo, 0);
    push_interleaved(&mut b);
    assert_eq!(b.next_batch(12, 8, 100).unwrap().ids(), [10, 20, 30]);
    assert_eq!(b.next_batch(12, 2, 100).unwrap().ids(), [11, 31]);
    b.push(40, &[9; 20], 6).unwrap();
    assert_eq!(b.next_batch(12, 8, 100).unwrap().ids(), [12]); // stops before the long one
    let batch = b.next_batch(12, 8, 100).unwrap();
    assert_eq!(batch.ids(), [40]);
    assert!(batch.oversized());
}

#[test]
fn rows_budget_counts_shared_prefixes_once() {
    for mode in [BatchMode::Fifo, BatchMode::Prefix] {
        let mut b = batcher(mode, u64::MAX);
        b.push(1, &[1, 2, 3, 4, 5, 6, 7, 8], 0).unwrap();
        b.push(2, &[1, 2, 3, 4, 5, 6, 7, 9], 0).unwrap();
        b.push(3, &[9, 9, 9, 9], 0).unwrap();
        let batch = b.next_batch_rows(100, 9, 8, 0).unwrap(); // rows 8 + 1
        assert_eq!(batch.ids(), [1, 2], "{mode:?}");
        assert_eq!(batch.shared_tokens(), 7);
        assert_eq!(b.next_batch_rows(100, 9, 8, 0).unwrap().ids(), [3], "{mode:?}");
        assert!(b.next_batch_rows(100, 9, 8, 0).unwrap().is_empty());
    }
    let mut b = batcher(BatchMode::Fifo, u64::MAX);
    b.push(1, &[1, 2, 3, 4, 5, 6, 7, 8], 0).unwrap();
    b.push(2, &[1, 2, 3, 4, 5, 6, 7, 9], 0).unwrap();
    assert_eq!(b.next_batch(9, 8, 0).unwrap().ids(), [1]); // the token budget alone: one
    let err = b.next_batch_rows(100, 0, 8, 0).err().unwrap();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("max_rows is 0"), "{}", err.message);
    b.push(3, &[5; 20], 0).unwrap(); // 20 rows, more than max_rows: alone, after id 2
    assert_eq!(b.next_batch_rows(100, 9, 8, 0).unwrap().ids(), [2]);
    let batch = b.next_batch_rows(100, 9, 8, 0).unwrap();
    assert_eq!(batch.ids(), [3]);
    assert!(batch.oversized());
}

#[test]
fn aged_requests_go_first() {
    let mut b = batcher(BatchMode::Prefix, 100);
    b.push(1, &[9, 9, 9, 9], 0).unwrap();
    for (id, last) in [(2, 4), (3, 5), (4, 6)] {
        b.push(id, &[1, 2, 3, last], 150).unwrap();
    }
    let batch = b.next_batch(8, 8, 200).unwrap();
    assert_eq!(batch.ids(), [1]); // the aged loner; the group (12 tokens) does not fit whole: not split
    assert_eq!(batch.n_aged(), 1);
    assert_eq!(batch.arrival_us(), [0]);
    let batch = b.next_batch(8, 8, 200).unwrap();
    assert_eq!(batch.ids(), [2, 3]); // the group starts the next batch (larger than it: cut)
    assert_eq!(batch.n_aged(), 0);
}

#[test]
fn refusals_leave_the_queue_unchanged() {
    let mut b =
        Batcher::new(&BatcherParams { max_requests: 2, max_queued_tokens: 8, ..BatcherParams::default() }).unwrap();
    b.push(1, &[1, 2, 3], 0).unwrap();
    let status = |r: Result<(), radix_mlp::Error>| r.unwrap_err().status;
    assert_eq!(status(b.push(1, &[4], 0)), Status::InvalidArgument);
    assert_eq!(status(b.push(2, &[], 0)), Status::InvalidArgument);
    assert_eq!(status(b.push(2, &[0; 9], 0)), Status::TooLarge);
    assert_eq!(status(b.push(2, &[0; 6], 0)), Status::Full);
    b.push(2, &[0; 5], 0).unwrap();
    let err = b.push(3, &[1], 0).unwrap_err();
    assert_eq!(err.status, Status::Full);
    assert!(err.message.contains("2 requests queued"), "{}", err.message);
    assert_eq!(Status::Full.code(), -13);
    assert_eq!(Status::from_code(-13), Status::Full);
    assert_eq!(Status::Full.description(), "queue full");
    assert_eq!(b.pending().unwrap(), (2, 8));
    assert_eq!(status(b.remove(9)), Status::InvalidArgument);
    b.remove(2).unwrap();
    assert_eq!(b.pending().unwrap(), (1, 3));
    assert_eq!(b.next_batch(0, 1, 0).err().map(|e| e.status), Some(Status::InvalidArgument));
    let bad = BatcherParams { max_requests: 0, ..BatcherParams::default() };
    assert_eq!(Batcher::new(&bad).err().map(|e| e.status), Some(Status::InvalidArgument));
}

#[test]
fn every_request_answered_once_and_planned_as_is() {
    let mut b = batcher(BatchMode::Prefix, 50);
    let mut planner = Planner::new().unwrap();
    let (mut answered, mut x) = (HashSet::new(), 12345u32);
    for round in 0..200u64 {
        for k in 0..3u64 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let len = 1 + (x >> 8) % 12;
            let tokens: Vec<u32> = (0..len).map(|i| if i < 4 { 1 + (x >> 20) % 3 } else { i }).collect();
            b.push(round * 3 + k, &tokens, round * 10).unwrap();
        }
        let batch = b.next_batch(40, 4, round * 10).unwrap();
        for &id in batch.ids() {
            assert!(answered.insert(id), "id {id} answered twice");
        }
        if !batch.is_empty() {
            let plan = planner
                .build(batch.input_ids(), batch.position_ids(), batch.cu_seqlens(), &PlanParams::default())
                .unwrap();
            assert_eq!(batch.shared_tokens(), plan.n_tokens() - plan.n_distinct());
        }
    }
    loop {
        let batch = b.next_batch(1000, 100, 1 << 40).unwrap();
        if batch.is_empty() {
            break;
        }
        batch.ids().iter().for_each(|&id| assert!(answered.insert(id)));
    }
    assert_eq!(answered.len(), 600);
}

#[test]
fn cached_groups_are_preferred() {
    let fixture = Fixture::load("qwen3_tiny");
    let model = Model::load(&fixture.dir).unwrap();
    let mut ctx = model.context_with(64, ContextParams { cache_bytes: 1 << 20, ..ContextParams::default() }).unwrap();
    let mut plain = model.context(64).unwrap();
    let warm = [[1u32, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7]];
    let (ids, pos, cu): (Vec<u32>, Vec<u32>, Vec<u32>) = (warm.concat(), (0..6).chain(0..6).collect(), vec![0, 6, 12]);
    let plan = Planner::new().unwrap().build(&ids, &pos, &cu, &PlanParams::default()).unwrap().to_owned();
    let mut out = vec![0.0; 12 * model.config().hidden_size];
    ctx.forward(&plan, &mut out).unwrap();
    assert_eq!(ctx.cached_prefix(&[1, 2, 3, 4, 5, 9]).unwrap(), 5);
    assert_eq!(ctx.cached_prefix(&[2, 2]).unwrap(), 0);
    assert_eq!(plain.cached_prefix(&[1, 2, 3]).unwrap(), 0);

    // Arriving together, the group under the cached prefix goes first with the cache; an older
    // group goes first whatever is cached (with a cache the batches go by age).
    let mut b = batcher(BatchMode::Prefix, u64::MAX);
    for i in 0..3u32 {
        b.push(10 + i as u64, &[8, 8, 8, 8, 8, i, i], 1).unwrap(); // nothing cached
        b.push(20 + i as u64, &[1, 2, 3, 4, 5, i, i], 1).unwrap(); // under the cached prefix
        b.push(30 + i as u64, &[9, 9, 9, 9, 9, i, i], 0).unwrap(); // older, nothing cached
    }
    let batch = b.next_batch_with_cache(&mut ctx, 21, 8, 3).unwrap();
    assert_eq!(batch.ids(), [30, 31, 32]);
    assert_eq!(batch.cached_tokens(), 0);
    let batch = b.next_batch_rows_with_cache(&mut ctx, 21, 11, 8, 3).unwrap(); // rows 7 + 2 + 2
    assert_eq!(batch.ids(), [20, 21, 22]);
    assert_eq!(batch.cached_tokens(), 5);
    let batch = b.next_batch(21, 8, 3).unwrap(); // detached again
    assert_eq!(batch.ids(), [10, 11, 12]);
    assert_eq!(batch.cached_tokens(), 0);
    let err = b.next_batch_with_cache(&mut plain, 21, 8, 3).err().unwrap();
    assert!(err.message.contains("no prefix cache"), "{}", err.message);
    let err = b.next_batch_rows_with_cache(&mut plain, 21, 21, 8, 3).err().unwrap();
    assert!(err.message.contains("no prefix cache"), "{}", err.message);
}

#[test]
fn route_keys_match_an_independent_implementation() {
    assert_eq!(route_key(&[], &RouteParams::default()).unwrap(), (0xefd01f60ba992926, 0));
    assert_eq!(route_key(&[1, 2, 3], &RouteParams::default()).unwrap(), (0xf50e90aae860fe4c, 3));
    let ids: Vec<u32> = (0..80).collect();
    assert_eq!(route_key(&ids, &RouteParams::default()).unwrap(), (0xa0f727075e90486a, 64));
    let five = RouteParams { prefix_tokens: 5, separator: None };
    assert_eq!(route_key(&ids, &five).unwrap(), (0xd43064948384057a, 5));
    let to_separator = RouteParams { prefix_tokens: 64, separator: Some(3) };
    assert_eq!(route_key(&ids, &to_separator).unwrap().1, 4);
    assert_eq!(route_key_header(0xf50e90aae860fe4c), "f50e90aae860fe4c");
    assert_eq!(route_key_header(1), "0000000000000001");
    let zero = RouteParams { prefix_tokens: 0, separator: None };
    assert_eq!(route_key(&ids, &zero).err().map(|e| e.status), Some(Status::InvalidArgument));
}
