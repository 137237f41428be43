//! The async runtime toolgate's commands run on.

/// A current-thread tokio runtime with IO and timers enabled: what every command that serves
/// one client, one broker or one probe runs on. (The gateway, serving many clients at once,
/// builds a multi-thread runtime of its own.)
pub fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
