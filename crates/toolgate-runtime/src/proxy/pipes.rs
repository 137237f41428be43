//! Pipe buffers that grow to the messages they carry (Linux).
//!
//! A Linux pipe holds 64 KiB unless told otherwise. A larger message crosses it in 64 KiB
//! pieces, and every piece costs its writer and its reader a wake-up: a 1 MiB result makes
//! 16 of them on each of the two pipes it crosses through toolgate, where a direct
//! connection has one pipe. So the first time a message larger than a pipe's buffer passes
//! through a pipe toolgate reads or writes (the client's stdin and stdout, the upstream's
//! stdin and stdout), toolgate grows that pipe to hold such a message, up to [`MAX`] (1 MiB,
//! the default `/proc/sys/fs/pipe-max-size`, the most an unprivileged process may ask for).
//!
//! Only then, not when it starts: the kernel counts the buffer capacity of every user's
//! pipes (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB by default) and gives a user past that
//! limit minimal buffers for every new pipe, in any program. Growing every pipe of every
//! proxy up front would spend that budget on servers that never send a large message.
//! Growing is only an optimisation: when it fails (the limit reached, a descriptor that is
//! not a pipe, another OS) the pipe stays as it is and nothing else changes.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The largest buffer toolgate asks for.
pub(crate) const MAX: usize = 1 << 20;

/// One pipe end of toolgate's and the size of its buffer.
#[derive(Debug)]
pub(crate) struct PipeGrowth {
    /// A duplicate of the descriptor, to resize the pipe through (`None`: never grow).
    fd: Option<OwnedFd>,
    capacity: usize,
}

impl PipeGrowth {
    /// Nothing to grow (not a pipe, or not one of toolgate's own).
    pub(crate) fn none() -> PipeGrowth {
        PipeGrowth {
            fd: None,
            capacity: MAX,
        }
    }

    /// The pipe behind `fd`, if it is one and this OS can resize it.
    pub(crate) fn of(fd: BorrowedFd<'_>) -> PipeGrowth {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::{FileType, fstat};
            let is_pipe = fstat(fd)
                .is_ok_and(|st| matches!(FileType::from_raw_mode(st.st_mode), FileType::Fifo));
            if is_pipe
                && let Ok(capacity) = rustix::pipe::fcntl_getpipe_size(fd)
                && let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            {
                return PipeGrowth {
                    fd: Some(dup),
                    capacity,
                };
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = fd;
        PipeGrowth::none()
    }

    /// The pipe's buffer size as toolgate knows it.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes room for a message of `len` bytes (a power of two at least `len`, at most
    /// [`MAX`]) if the buffer is smaller. After a failure it never tries again.
    pub(crate) fn fit(&mut self, len: usize) {
        if len <= self.capacity {
            return;
        }
        let Some(fd) = &self.fd else {
            return;
        };
        let want = len.checked_next_power_of_two().unwrap_or(MAX).min(MAX);
        match resize(fd.as_fd(), want) {
            Ok(capacity) => {
                tracing::debug!(
                    "pipe buffer grown from {} to {capacity} bytes",
                    self.capacity
                );
                self.capacity = capacity.max(want);
            }
            Err(err) => {
                tracing::debug!("pipe buffer stays at {} bytes: {err}", self.capacity);
                self.fd = None;
                self.capacity = MAX;
            }
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn resize(fd: BorrowedFd<'_>, size: usize) -> std::io::Result<usize> {
    Ok(rustix::pipe::fcntl_setpipe_size(fd, size)?)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn resize(_fd: BorrowedFd<'_>, _size: usize) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use rustix::pipe::{fcntl_getpipe_size, pipe};

    #[test]
    fn a_pipe_grows_to_the_message_and_never_shrinks() {
        let (read, write) = pipe().unwrap();
        let mut growth = PipeGrowth::of(write.as_fd());
        assert_eq!(growth.capacity(), fcntl_getpipe_size(&read).unwrap());
        let before = growth.capacity();
        growth.fit(before);
        assert_eq!(fcntl_getpipe_size(&read).unwrap(), before, "fits already");
        growth.fit(before + 1);
        let grown = fcntl_getpipe_size(&read).unwrap();
        assert!(grown > before && grown >= (before + 1).next_power_of_two().min(MAX));
        assert_eq!(growth.capacity(), grown);
        growth.fit(10);
        assert_eq!(fcntl_getpipe_size(&read).unwrap(), grown, "never shrinks");
        growth.fit(64 * MAX);
        assert_eq!(fcntl_getpipe_size(&read).unwrap(), MAX, "at most MAX");
        // Both ends share one buffer: growing through the read end works too.
        let (read, _write) = pipe().unwrap();
        let mut growth = PipeGrowth::of(read.as_fd());
        growth.fit(MAX);
        assert_eq!(fcntl_getpipe_size(&read).unwrap(), MAX);
    }

    #[test]
    fn what_is_not_a_pipe_is_left_alone() {
        let file = tempfile::tempfile().unwrap();
        let mut growth = PipeGrowth::of(file.as_fd());
        assert!(growth.fd.is_none());
        growth.fit(MAX);
        let mut none = PipeGrowth::none();
        none.fit(MAX);
        assert!(none.fd.is_none());
    }

    #[test]
    fn a_refused_resize_is_not_retried() {
        let (read, write) = pipe().unwrap();
        let mut growth = PipeGrowth::of(write.as_fd());
        drop((read, write));
        // The duplicate keeps the pipe open; make the resize fail by replacing the
        // duplicate with a descriptor that is not a pipe.
        growth.fd = Some(tempfile::tempfile().unwrap().into());
        // Twice a pipe's default 64 KiB buffer.
        growth.fit(2 * 64 * 1024);
        assert!(growth.fd.is_none(), "gave up after the failure");
        assert_eq!(growth.capacity(), MAX);
    }
}
