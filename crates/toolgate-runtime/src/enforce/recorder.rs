//! The audit records of large results, hashed and written on a thread of their own.
//!
//! Every result record carries the SHA-256 of the result's canonical JSON, computed from
//! the JSON text the server sent (`toolgate_audit::canonical_sha256_of_json`, no value
//! tree). For a large result that is most of toolgate's work (about 0.8 ms per MiB, nearly
//! all of it SHA-256 itself), and nothing waits for it: the record only has to reach the
//! log. So the record of a result of [`LARGE_RESULT`] bytes or more is handed to the
//! recorder thread, with the result's text (shared with the taint index), as soon as the
//! result is read; it hashes the result (and reads a `tools/call` result's `isError`) while
//! the result is delivered and taint-indexed, and appends the record itself. The thread runs
//! at the lowest priority (nice 19, Linux): it uses CPU that the client, the server and
//! toolgate's main thread leave free. Records of small results
//! are written right after delivery, as before: a hand-off would cost them more than it
//! saves.
//!
//! Consequences, all bounded: a large result's record can land in the log after records of
//! later messages (each record says which request it belongs to); at most [`QUEUE`]
//! records wait (with the queue full, the proxy writes the record itself after delivery,
//! as for a small result: it never waits for the low-priority thread); and
//! [`Recorder::finish`] writes every queued record before toolgate exits.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use toolgate_audit::{AuditWriter, Event};

use super::{add_result, lock};

/// Results whose JSON text is at least this long get their record written by the thread.
pub(super) const LARGE_RESULT: usize = 64 * 1024;

/// Records waiting for the thread at most.
const QUEUE: usize = 8;

/// One result record: the event (session and server filled in) and the result to hash,
/// its JSON text as the server sent it.
pub(super) struct Job {
    pub event: Event,
    pub result: super::ResultText,
    /// Keep the raw result in the record (`--audit-raw`).
    pub raw: bool,
    pub writer: Arc<AuditWriter>,
}

/// The queue into the recorder thread, and the thread.
type Thread = (SyncSender<Box<Job>>, JoinHandle<()>);

/// The recorder thread, started on first use.
#[derive(Default)]
pub(super) struct Recorder {
    thread: Mutex<Option<Thread>>,
    /// The thread could not be started: records are written inline.
    unavailable: std::sync::atomic::AtomicBool,
}

impl Recorder {
    /// Hands a job to the thread; gives it back if there is no thread or its queue is full.
    pub(super) fn submit(&self, job: Box<Job>) -> Result<(), Box<Job>> {
        use std::sync::atomic::Ordering;
        if self.unavailable.load(Ordering::Relaxed) {
            return Err(job);
        }
        let mut thread = lock(&self.thread);
        if thread.is_none() {
            match spawn() {
                Some(started) => *thread = Some(started),
                None => {
                    self.unavailable.store(true, Ordering::Relaxed);
                    return Err(job);
                }
            }
        }
        let Some((jobs, _)) = thread.as_ref() else {
            return Err(job);
        };
        // A full queue does not wait: the thread runs at the lowest priority, so on a busy
        // machine a slot could take long to free; the caller writes this record itself.
        jobs.try_send(job).map_err(|e| match e {
            TrySendError::Full(job) | TrySendError::Disconnected(job) => job,
        })
    }

    /// Writes every queued record and stops the thread.
    pub(super) fn finish(&self) {
        let started = lock(&self.thread).take();
        if let Some((jobs, handle)) = started {
            drop(jobs);
            if handle.join().is_err() {
                tracing::warn!("the result recorder thread panicked; queued records may be lost");
            }
        }
    }
}

/// Writes one job's record.
fn write(job: Box<Job>) {
    let Job {
        mut event,
        result,
        raw,
        writer,
    } = *job;
    add_result(&mut event, &result, raw);
    drop(result);
    if let Err(e) = writer.append(&event) {
        tracing::warn!(
            "the result of `{}` (request {}) was not audited: the audit log cannot be written ({e})",
            event.tool.as_deref().unwrap_or("?"),
            event.request_id.as_deref().unwrap_or("?")
        );
    }
}

/// Gives the calling thread the lowest priority (nice 19; on Linux the nice value is per
/// thread): hashing a record only has to finish eventually, so it should only use CPU that
/// no one else wants. With the client, the server and toolgate's main thread busy with a
/// large result on two cores, a recorder at normal priority stretches all of them (1 MiB
/// result, added p50: +2.4..2.9 ms at nice 0, +1.7..1.9 ms at nice 19). No record waits on
/// it for long: with its queue full the proxy writes records itself, and
/// [`Recorder::finish`] writes what is queued before toolgate exits.
fn yield_to_everything_else() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE) {
        tracing::debug!("the result recorder keeps its priority: {e}");
    }
}

/// The recorder thread's nice value.
const NICE: i32 = 19;

fn spawn() -> Option<Thread> {
    let (jobs, queue): (SyncSender<Box<Job>>, Receiver<Box<Job>>) = sync_channel(QUEUE);
    let spawned = std::thread::Builder::new()
        .name("toolgate-audit".to_owned())
        .spawn(move || {
            yield_to_everything_else();
            queue.into_iter().for_each(write)
        });
    match spawned {
        Ok(handle) => Some((jobs, handle)),
        Err(e) => {
            tracing::warn!(
                "cannot start the result recorder thread ({e}); results are recorded inline"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use toolgate_audit::Kind as AuditKind;

    fn job(writer: &Arc<AuditWriter>, n: u64, raw: bool) -> Box<Job> {
        let mut event = Event::new(AuditKind::Result);
        event.request_id = Some(n.to_string());
        // As servers write them: members unsorted, some whitespace, escapes.
        let text = "x\\n\\u0041".repeat(LARGE_RESULT / 8);
        // Odd requests failed; the record says so (read from the text on the thread).
        let failed = n % 2 == 1;
        let result = format!(
            r#"{{"n": {n}, "content": [{{"type": "text", "text": "{text}"}}], "isError": {failed}}}"#
        );
        Box::new(Job {
            event,
            result: super::super::ResultText {
                text: result.into(),
                tool_call: true,
            },
            raw,
            writer: Arc::clone(writer),
        })
    }

    /// The nice value of this process's thread named `name`, from /proc.
    #[cfg(target_os = "linux")]
    fn nice_of_thread(name: &str) -> Option<i32> {
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let dir = task.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // After `(comm)`: state is field 3, nice field 19.
            let rest = stat.rsplit_once(')')?.1;
            return rest.split_whitespace().nth(16)?.parse().ok();
        }
        None
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_recorder_runs_at_the_lowest_priority() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Arc::new(AuditWriter::open(dir.path().join("audit.jsonl")).unwrap());
        let recorder = Recorder::default();
        assert!(recorder.submit(job(&writer, 0, false)).is_ok());
        // The thread lowers its own priority first thing; wait (bounded) until it has.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut nice = nice_of_thread("toolgate-audit");
        while nice != Some(NICE) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
            nice = nice_of_thread("toolgate-audit");
        }
        assert_eq!(nice, Some(NICE));
        // The thread that submitted keeps its own.
        assert_ne!(rustix::process::getpriority_process(None).ok(), Some(NICE));
        recorder.finish();
    }

    #[test]
    fn every_queued_record_is_written_in_order_with_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let writer = Arc::new(AuditWriter::open(&path).unwrap());
        let recorder = Recorder::default();
        let jobs: Vec<Box<Job>> = (0..3 * QUEUE as u64)
            .map(|n| job(&writer, n, n == 0))
            .collect();
        let values: Vec<Value> = jobs
            .iter()
            .map(|j| serde_json::from_slice(&j.result.text).unwrap())
            .collect();
        let expected: Vec<String> = values.iter().map(super::super::canonical_sha256).collect();
        // A full queue gives the job back at once (the proxy then writes it itself); here
        // it is offered again until the thread takes it, so the order stays the same.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for mut j in jobs {
            loop {
                match recorder.submit(j) {
                    Ok(()) => break,
                    Err(back) => {
                        assert_eq!(back.event.kind, AuditKind::Result);
                        assert!(
                            std::time::Instant::now() < deadline,
                            "the queue never drained"
                        );
                        j = back;
                        std::thread::yield_now();
                    }
                }
            }
        }
        recorder.finish();
        let records: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .skip(1) // the chain's header
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 3 * QUEUE);
        for (n, (record, hash)) in records.iter().zip(&expected).enumerate() {
            assert_eq!(record["request_id"], n.to_string(), "{record}");
            assert_eq!(record["result_sha256"], hash.as_str(), "{record}");
            assert_eq!(record.get("raw").is_some(), n == 0, "{record}");
            assert_eq!(record["isError"], n % 2 == 1, "{record}");
            if n == 0 {
                assert_eq!(record["raw"]["result"], values[0]);
            }
        }
        assert!(
            toolgate_audit::verify_path(&path)
                .unwrap()
                .problem
                .is_none()
        );
    }
}
