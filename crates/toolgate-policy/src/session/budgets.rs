//! Budget counters: the calls of each tool this session and within the budget window.

use super::Session;

impl Session {
    /// Count one attempt to call `tool` at `now_ms`. Returns `(calls this session,
    /// calls within the window)` including this one, or None when the session cannot track
    /// another tool (memory bound). `window` is `(max, per_ms)`; timestamps older than the
    /// window are forgotten and at most `max + 1` are kept.
    pub fn record_attempt(
        &mut self,
        tool: &str,
        now_ms: u64,
        window: Option<(u64, u64)>,
    ) -> Option<(u64, u64)> {
        if let Some((t, total, in_window)) = self.counted_externally.take()
            && t == tool
        {
            if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
                return None;
            }
            let c = self.counters.entry(tool.to_owned()).or_default();
            c.total = c.total.max(total);
            return Some((total, if window.is_some() { in_window } else { 0 }));
        }
        if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
            return None;
        }
        let c = self.counters.entry(tool.to_owned()).or_default();
        c.total = c.total.saturating_add(1);
        let mut in_window = 0;
        if let Some((max, per_ms)) = window {
            // The window is (now - per, now]; nothing has expired before `per` has passed.
            if let Some(start) = now_ms.checked_sub(per_ms) {
                while c.window.front().is_some_and(|t| *t <= start) {
                    c.window.pop_front();
                }
            }
            c.window.push_back(now_ms);
            let keep = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
            while c.window.len() > keep {
                c.window.pop_front();
            }
            in_window = c.window.len() as u64;
        }
        Some((c.total, in_window))
    }

    /// The next attempt of `tool` was counted elsewhere, atomically across the processes
    /// that share this agent session (the gateway's store): `total` attempts this session
    /// and `in_window` within the budget window, this one included. The next
    /// [`Session::record_attempt`] of `tool` returns these counts instead of counting.
    pub fn count_externally(&mut self, tool: &str, total: u64, in_window: u64) {
        self.counted_externally = Some((tool.to_owned(), total, in_window));
    }

    /// Counts an attempt to call `tool` made at `at_ms` by another proxy of the same agent
    /// session (and the same server), so budgets count across proxies. Only ever adds to the
    /// count. Returns false when the session cannot track another tool.
    pub fn import_attempt(&mut self, tool: &str, at_ms: u64) -> bool {
        /// Remote timestamps kept per tool until the next local attempt trims the window.
        const MAX_IMPORTED: usize = 4096;
        if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
            return false;
        }
        let c = self.counters.entry(tool.to_owned()).or_default();
        c.total = c.total.saturating_add(1);
        let at = c.window.partition_point(|t| *t <= at_ms);
        c.window.insert(at, at_ms);
        while c.window.len() > MAX_IMPORTED {
            c.window.pop_front();
        }
        true
    }

    /// Calls to `tool` counted so far.
    pub fn calls(&self, tool: &str) -> u64 {
        self.counters.get(tool).map_or(0, |c| c.total)
    }
}
