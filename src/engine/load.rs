//! How many of this process's cores other processes keep busy, from the kernel's CPU time
//! counters (`/proc/stat` for the cores this process may run on, `/proc/self/stat` for
//! its own time). Linux only: elsewhere nothing can be sampled.

/// CPU time counters at one moment, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    /// Time the process's cores spent running anything (steal included: the host ran
    /// something else on them).
    busy: u64,
    /// `busy` plus the idle time of those cores.
    total: u64,
    /// Time this process's own threads ran.
    own: u64,
    /// How many cores the counters cover.
    cores: usize,
}

impl CpuTimes {
    /// How many cores the counters cover.
    pub(crate) fn cores(&self) -> usize {
        self.cores
    }
}

/// The counters now, or `None` where `/proc` does not give them.
pub(crate) fn sample() -> Option<CpuTimes> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|list| parse_cpu_list(list.trim()))?;
    let (busy, total) = core_times(&std::fs::read_to_string("/proc/stat").ok()?, &allowed)?;
    let own = own_time(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    Some(CpuTimes {
        busy,
        total,
        own,
        cores: allowed.len(),
    })
}

/// How many cores' worth of time other processes used between two samples (0 when the
/// samples cover no time or differ in their cores).
pub(crate) fn others_busy(before: CpuTimes, after: CpuTimes) -> f64 {
    let total = after.total.saturating_sub(before.total);
    if total == 0 || before.cores != after.cores {
        return 0.0;
    }
    let busy = after.busy.saturating_sub(before.busy);
    let own = after.own.saturating_sub(before.own);
    // `total` is every core's time: per core, the window was `total / cores` ticks long.
    busy.saturating_sub(own) as f64 * after.cores as f64 / total as f64
}

/// The cores of a kernel CPU list such as `0-3,8,10-11`.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cores.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse().ok()?),
            None => cores.push(part.trim().parse().ok()?),
        }
    }
    (!cores.is_empty()).then_some(cores)
}

/// Busy and total ticks of the `cpuN` lines of `/proc/stat` whose N is in `cores`.
fn core_times(stat: &str, cores: &[usize]) -> Option<(u64, u64)> {
    let (mut busy, mut total, mut seen) = (0u64, 0u64, 0usize);
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let Some(Ok(core)) = fields.next().map(str::parse::<usize>) else {
            continue; // the all-cores line
        };
        if !cores.contains(&core) {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let t: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let [user, nice, system, idle, iowait, irq, softirq, steal] = t[..] else {
            return None;
        };
        let b = user + nice + system + irq + softirq + steal;
        busy += b;
        total += b + idle + iowait;
        seen += 1;
    }
    (seen > 0).then_some((busy, total))
}

/// User plus system ticks of this process, from `/proc/self/stat` (fields 14 and 15,
/// counted after the command name, which may itself hold spaces and parentheses).
fn own_time(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) is the 12th of these.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    const STAT: &str = "cpu  300 0 30 700 10 0 5 0 0 0\n\
        cpu0 100 0 10 300 5 0 2 0 0 0\n\
        cpu1 200 0 20 400 5 0 3 7 0 0\n\
        intr 1 2 3\n";

    #[test]
    fn core_times_add_up_the_allowed_cores_only() {
        assert_eq!(
            core_times(STAT, &[0, 1]),
            Some((112 + 230, 112 + 305 + 230 + 405))
        );
        assert_eq!(core_times(STAT, &[1]), Some((230, 635)));
        assert_eq!(core_times(STAT, &[4]), None);
        assert_eq!(core_times("cpu0 1 2\n", &[0]), None);
    }

    #[test]
    fn own_time_skips_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (py (x) 3) S 1 2 3 4 5 6 7 8 9 10 70 30 0 0 20 0 1 0";
        assert_eq!(own_time(stat), Some(100));
        assert_eq!(own_time("4242 (py) S 1 2"), None);
    }

    fn at(busy: u64, total: u64, own: u64) -> CpuTimes {
        CpuTimes {
            busy,
            total,
            own,
            cores: 2,
        }
    }

    #[test]
    fn others_are_the_busy_time_this_process_did_not_use() {
        // Two cores for 100 ticks each: 150 busy, 60 of them ours, so 0.9 of a core others'.
        let busy = others_busy(at(0, 0, 0), at(150, 200, 60));
        assert!((busy - 0.9).abs() < 1e-12, "{busy}");
        // Our threads alone: nobody else.
        assert_eq!(others_busy(at(10, 10, 10), at(110, 210, 110)), 0.0);
        // No time passed, or counters from different core sets.
        assert_eq!(others_busy(at(5, 5, 0), at(5, 5, 0)), 0.0);
        let mut three = at(150, 200, 0);
        three.cores = 3;
        assert_eq!(others_busy(at(0, 0, 0), three), 0.0);
    }

    #[test]
    fn this_machine_can_be_sampled() {
        if cfg!(target_os = "linux") {
            let s = sample().expect("counters under /proc");
            assert!(s.cores >= 1 && s.total >= s.busy);
        }
    }
}
