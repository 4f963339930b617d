//! A second thread for the AEAD work of a batch. The event loop fixes every datagram's
//! counter and header in order (`seal_deferred`, `handle_deferred`), then hands the batch's
//! ChaCha20-Poly1305 work to [`CryptoPool::run`]: the loop's thread and one crypto thread
//! take datagrams from a shared atomic index until none is left (work stealing), and the
//! loop goes on once every datagram is done. Nothing is allocated per batch or per
//! datagram; the wake-up is at most one condition-variable notify per batch (none when the
//! crypto thread is still awake from the last one).
//!
//! Stealing rather than splitting in halves matters on a busy machine: if the crypto thread
//! is not scheduled in time, the loop's thread does the whole batch itself and waits only
//! for the datagram the other thread may be in the middle of; the worst case is the single
//! thread's speed, not a stall.
//!
//! Ordering and the replay window are untouched: counters are taken before, and windows
//! committed after, in the loop's thread in arrival order; only the encryption of datagrams
//! whose places are already fixed runs in parallel. This is where braid differs from its
//! first daemon (one thread for everything) and resembles wireguard-go, whose encryption
//! runs on worker goroutines; `braid bench tunnel-throughput` measures the effect.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use braid_secure::{Authenticated, DataHeader, Dropped, OpenKey};

/// Datagrams each thread claims at a time.
const CHUNK: usize = 2;
/// Batches smaller than this are done inline: waking a thread costs more.
const MIN_PARALLEL: usize = 4;

/// The work of one batch: `f(i)` for every `i < n`, each `i` touching only its own data.
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize) + Sync + 'static),
    n: usize,
    generation: u64,
}

// SAFETY: the pointee is `Sync` and outlives every use: `CryptoPool::run` does not return
// (so the borrow it erased stays alive) until the worker has stopped using the job.
unsafe impl Send for Job {}

struct State {
    job: Option<Job>,
    /// The worker is running the current job's items.
    busy: bool,
    /// The worker waits on `work` (only then does publishing a job cost a wake-up).
    sleeping: bool,
    /// `run` waits on `done` (only then does the worker's finish cost a wake-up).
    waiting: bool,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    next: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in a job is a bug; the state itself stays consistent, so go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims and runs items of `f` until none is left.
    fn drain(&self, f: &(dyn Fn(usize) + Sync), n: usize) {
        loop {
            let i = self.next.fetch_add(CHUNK, Ordering::Relaxed);
            if i >= n {
                return;
            }
            for k in i..(i + CHUNK).min(n) {
                f(k);
            }
        }
    }
}

/// The crypto thread and its hand-over.
pub struct CryptoPool {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    generation: u64,
}

impl CryptoPool {
    /// Starts the crypto thread (named `name`).
    pub fn new(name: &str) -> std::io::Result<CryptoPool> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                job: None,
                busy: false,
                sleeping: false,
                waiting: false,
                stop: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            next: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || worker(&s))?;
        Ok(CryptoPool {
            shared,
            thread: Some(thread),
            generation: 0,
        })
    }

    /// Runs `f(i)` for every `i < n`, on this thread and the crypto thread, and returns
    /// when all are done. `f` must touch only item `i`'s data.
    pub fn run(&mut self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        if n < MIN_PARALLEL {
            (0..n).for_each(f);
            return;
        }
        self.generation += 1;
        // SAFETY: only the lifetime is erased. The worker dereferences the pointer only
        // while `busy` is set for this job, and this function clears the job and waits for
        // `busy` to fall before it returns, so `f` outlives every use.
        let erased: &'static (dyn Fn(usize) + Sync + 'static) = unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f)
        };
        self.shared.next.store(0, Ordering::Relaxed);
        let sleeping = {
            let mut st = self.shared.lock();
            st.job = Some(Job {
                f: erased,
                n,
                generation: self.generation,
            });
            st.sleeping
        };
        if sleeping {
            self.shared.work.notify_one();
        }
        self.shared.drain(f, n);
        let mut st = self.shared.lock();
        st.job = None;
        while st.busy {
            st.waiting = true;
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.waiting = false;
    }
}

impl Drop for CryptoPool {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn worker(shared: &Shared) {
    let mut last = 0u64;
    let mut st = shared.lock();
    loop {
        if st.stop {
            return;
        }
        match st.job {
            Some(job) if job.generation != last => {
                last = job.generation;
                st.busy = true;
                drop(st);
                // SAFETY: `busy` is set under the lock while the job is published, so
                // `run` is still waiting and the closure is alive (see `run`).
                let f = unsafe { &*job.f };
                shared.drain(f, job.n);
                st = shared.lock();
                st.busy = false;
                if st.waiting {
                    shared.done.notify_one();
                }
            }
            _ => {
                st.sleeping = true;
                st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
                st.sleeping = false;
            }
        }
    }
}

/// A raw pointer that may cross to the crypto thread: each item derives its own disjoint
/// slice from it.
pub struct SharedPtr<T>(pub *mut T);

impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SharedPtr`).
    pub fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: used only by `CryptoPool::run` jobs whose items touch disjoint parts of the
// pointee, while the owner waits in `run`.
unsafe impl<T> Sync for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Send for SharedPtr<T> {}

/// A received batch's data datagrams waiting for their AEAD: where each lies in the batch's
/// buffer, what the caller needs to know of it (`M`: its path, its source), its key. The
/// lists keep their memory from batch to batch.
pub struct RxOpen<M> {
    items: Vec<(M, Range<usize>, OpenKey, DataHeader)>,
    results: Vec<Option<Result<Authenticated, Dropped>>>,
    pool: Option<CryptoPool>,
}

impl<M> Default for RxOpen<M> {
    fn default() -> Self {
        RxOpen {
            items: Vec::new(),
            results: Vec::new(),
            pool: None,
        }
    }
}

impl<M: Copy + Sync> RxOpen<M> {
    pub fn new(pool: Option<CryptoPool>) -> RxOpen<M> {
        RxOpen {
            items: Vec::with_capacity(1024),
            results: Vec::with_capacity(1024),
            pool,
        }
    }

    /// A datagram at `buf[range]` to open with `key`.
    pub fn push(&mut self, meta: M, range: Range<usize>, key: OpenKey, header: DataHeader) {
        self.items.push((meta, range, key, header));
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Authenticates and decrypts every datagram in place in `buf`, on both threads.
    pub fn open_all(&mut self, buf: &mut [u8]) {
        let n = self.items.len();
        self.results.clear();
        self.results.resize(n, None);
        let items = &self.items;
        let base = SharedPtr(buf.as_mut_ptr());
        let out = SharedPtr(self.results.as_mut_ptr());
        let buf_len = buf.len();
        let open = move |i: usize| {
            let (_, r, key, header) = &items[i];
            let result = if r.start <= r.end && r.end <= buf_len {
                // SAFETY: the items' ranges are disjoint datagrams of one receive batch
                // (pushed in order, each after the last) within `buf`, checked just above;
                // `buf` is not touched otherwise until `run` returns.
                let d = unsafe { std::slice::from_raw_parts_mut(base.get().add(r.start), r.len()) };
                key.open(header, d)
            } else {
                Err(Dropped::Forged)
            };
            // SAFETY: item `i` writes only `results[i]`, which exists (resized to `n`).
            unsafe { *out.get().add(i) = Some(result) };
        };
        match self.pool.as_mut() {
            Some(pool) => pool.run(n, &open),
            None => (0..n).for_each(open),
        }
    }

    /// Item `i` after [`RxOpen::open_all`]: its metadata, range and result.
    pub fn result(&mut self, i: usize) -> (M, Range<usize>, Result<Authenticated, Dropped>) {
        let (m, r, _, _) = &self.items[i];
        let res = self.results[i].take().unwrap_or(Err(Dropped::Forged));
        (*m, r.clone(), res)
    }

    /// Forgets the batch (keeping the memory).
    pub fn clear(&mut self) {
        self.items.clear();
        self.results.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_runs_exactly_once() {
        let mut pool = CryptoPool::new("test-crypto").unwrap();
        for n in [0, 1, 3, 4, 5, 64, 1000] {
            let mut out = vec![0u32; n];
            let p = SharedPtr(out.as_mut_ptr());
            let f = move |i: usize| {
                // SAFETY: item `i` writes only element `i`, within `n`.
                unsafe { *p.get().add(i) += i as u32 + 1 };
            };
            pool.run(n, &f);
            assert_eq!(out, (1..=n as u32).collect::<Vec<_>>());
        }
    }
}
